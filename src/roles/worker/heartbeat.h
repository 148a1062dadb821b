// The worker's heartbeat thread: every heartbeat_interval_s / 2 it lists the leases in progress
// (renewing them), reports the engine's version, tokens/s and idle fraction, and marks the leases
// the hub cancelled so the rollout loop drops their rollouts.
#pragma once
#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <thread>

#include "net/hub_client.h"
#include "roles/worker/lease_book.h"

namespace stoa::worker {

// What the rollout loop publishes for the heartbeat (written by the loop, read by the thread).
struct WorkerGauges {
  std::atomic<uint64_t> tokens_generated{0};
  std::atomic<uint64_t> engine_version{0};
  std::atomic<bool> have_engine{false};
  std::atomic<double> idle_fraction{0};
  // The blob download in progress, if any (set once before the threads start).
  std::function<std::optional<net::BlobDownload>()> download;
};

class HeartbeatThread {
 public:
  // Starts beating at once; `done` is incremented when the thread leaves (bounded shutdown).
  HeartbeatThread(net::HubClient& hub, std::string worker_id, int heartbeat_interval_s,
                  LeaseBook& book, const WorkerGauges& gauges, const std::atomic<bool>& stop,
                  std::atomic<int>& done);
  ~HeartbeatThread() { join(); }
  HeartbeatThread(const HeartbeatThread&) = delete;
  HeartbeatThread& operator=(const HeartbeatThread&) = delete;
  void join() {
    if (thread_.joinable()) thread_.join();
  }

 private:
  void loop();

  net::HubClient& hub_;
  std::string worker_id_;
  int interval_s_;
  LeaseBook& book_;
  const WorkerGauges& gauges_;
  const std::atomic<bool>& stop_;
  std::atomic<int>& done_;
  std::thread thread_;
};

}  // namespace stoa::worker
