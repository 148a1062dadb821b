#include "roles/worker/sync_thread.h"

#include <algorithm>
#include <chrono>
#include <exception>

#include "core/log.h"
#include "roles/worker/worker_threads.h"

namespace stoa::worker {
namespace {
using namespace std::chrono_literals;
}  // namespace

void run_weight_sync(WeightSync& sync, std::stop_token stop, HubContact* contact) {
  int failures = 0;
  uint64_t failed_before = 0;
  while (!stop.stop_requested()) {
    try {
      // Short enough that a stopping worker is not held up long by its own long-poll.
      sync.step(std::chrono::seconds(5));
      if (contact) contact->answered();
      failures = 0;
      // A sync that just failed (bad blobs) is not retried in a tight loop.
      const uint64_t failed = sync.counters().failed_syncs;
      if (failed != failed_before) wait_for_stop(stop, 200ms);
      failed_before = failed;
    } catch (const std::exception& e) {
      if (contact && is_unreachable(e))
        contact->unreachable("sync", e.what());
      else
        log_warn("worker", "sync: ", e.what());
      wait_for_stop(stop,
                    std::chrono::milliseconds(std::min(10000, 250 << std::min(failures++, 6))));
    }
  }
}

}  // namespace stoa::worker
