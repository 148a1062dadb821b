#include "roles/worker/sync_thread.h"

#include <algorithm>
#include <chrono>
#include <exception>

#include "core/log.h"

namespace stoa::worker {
namespace {
using namespace std::chrono_literals;
}  // namespace

SyncThread::SyncThread(WeightSync& sync, const std::atomic<bool>& stop, std::atomic<int>& done)
    : sync_(sync), stop_(stop), done_(done), thread_([this] { loop(); }) {}

void SyncThread::loop() {
  int failures = 0;
  uint64_t failed_before = 0;
  while (!stop_) {
    try {
      // Short enough that a stopping worker is not held up long by its own long-poll.
      sync_.step(std::chrono::seconds(5));
      failures = 0;
      // A sync that just failed (bad blobs) is not retried in a tight loop.
      const uint64_t failed = sync_.counters().failed_syncs;
      if (failed != failed_before) std::this_thread::sleep_for(200ms);
      failed_before = failed;
    } catch (const std::exception& e) {
      log_warn("worker", "sync: ", e.what());
      const auto wait = std::min(10000, 250 << std::min(failures++, 6));
      for (int i = 0; i < wait / 50 && !stop_; ++i) std::this_thread::sleep_for(50ms);
    }
  }
  ++done_;
}

}  // namespace stoa::worker
