// A worker's share of checking (docs/design/verification.md, "Peer checks"): a loop that
// leases other workers' rollouts from the hub (POST /v1/checks/lease; the hub picks which, and
// bounds how many by the worker's own checked work), replays each exactly as `stoa validate`
// does (roles/verify/replay_jobs.h) on its own engine, one thread, and posts the verdict.
// It costs the worker a second copy of the weights for up to `keep_versions` versions while it
// checks, and one core while a replay runs. A hub without peer checks answers 404: the loop
// ends at once. It never takes the worker down: a refused session or a setup error ends only
// the checking.
#pragma once
#include <stop_token>
#include <string>

#include "net/hub_client.h"
#include "roles/verify/replay_jobs.h"

namespace stoa::worker {

struct CheckOptions {
  std::string mirror_dir;    // the checker's blob mirror (<state dir>/checks)
  int threads = 1;           // engine threads for a replay
  size_t keep_versions = 2;  // versions kept built (a rollout spans at most a switch or two)
  double idle_wait_s = 2;    // pause when the hub had no check for this worker
};

// Checks until a stop is requested (a thread of WorkerThreads; a stop waits for the replay in
// progress), or until the hub refuses or has no checks.
void run_peer_checks(net::HubClient& hub, const verify::ReplayModel& model,
                     const verify::ReplayTaskMaker& make_task, const CheckOptions& options,
                     std::stop_token stop);

}  // namespace stoa::worker
