// A worker's share of checking (docs/design/verification.md, "Peer checks"): a thread that
// leases other workers' rollouts from the hub (POST /v1/checks/lease; the hub picks which, and
// bounds how many by the worker's own checked work), replays each exactly as `stoa validate`
// does (roles/verify/replay_jobs.h) on its own engine, one thread, and posts the verdict.
// It costs the worker a second copy of the weights for up to `keep_versions` versions while it
// checks, and one core while a replay runs. A hub without peer checks answers 404: the thread
// ends at once. It never takes the worker down: a refused session or a setup error ends only
// the checking.
#pragma once
#include <atomic>
#include <mutex>
#include <string>
#include <thread>

#include "net/hub_client.h"
#include "roles/verify/replay_jobs.h"

namespace stoa::worker {

struct CheckOptions {
  std::string mirror_dir;    // the checker's blob mirror (<state dir>/checks)
  int threads = 1;           // engine threads for a replay
  size_t keep_versions = 2;  // versions kept built (a rollout spans at most a switch or two)
  double idle_wait_s = 2;    // pause when the hub had no check for this worker
};

class CheckThread {
 public:
  CheckThread(net::HubClient& hub, verify::ReplayModel model, verify::ReplayTaskMaker make_task,
              CheckOptions options, const std::atomic<bool>& stop);
  ~CheckThread() { join(); }
  CheckThread(const CheckThread&) = delete;
  CheckThread& operator=(const CheckThread&) = delete;
  void join();
  verify::ReplayJobStats stats() const;

 private:
  void run(const std::atomic<bool>& stop);

  net::HubClient& hub_;
  verify::ReplayModel model_;
  verify::ReplayTaskMaker make_task_;
  CheckOptions options_;
  mutable std::mutex mutex_;
  verify::ReplayJobStats stats_;
  std::thread thread_;
};

}  // namespace stoa::worker
