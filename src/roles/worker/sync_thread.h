// The worker's weight-sync thread: runs WeightSync::step in a loop (long-polling the hub and
// catching up to each new version), backing off on failures, until `stop` is set.
#pragma once
#include <atomic>
#include <thread>

#include "roles/worker/weight_sync.h"

namespace stoa::worker {

class SyncThread {
 public:
  // Starts syncing at once; `done` is incremented when the thread leaves (bounded shutdown).
  SyncThread(WeightSync& sync, const std::atomic<bool>& stop, std::atomic<int>& done);
  ~SyncThread() { join(); }
  SyncThread(const SyncThread&) = delete;
  SyncThread& operator=(const SyncThread&) = delete;
  void join() {
    if (thread_.joinable()) thread_.join();
  }

 private:
  void loop();

  WeightSync& sync_;
  const std::atomic<bool>& stop_;
  std::atomic<int>& done_;
  std::thread thread_;
};

}  // namespace stoa::worker
