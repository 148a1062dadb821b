// `stoa work --sync-only`: a worker that only follows the hub's versions — joins, fetches and
// verifies every anchor and patch (from the swarm or the hub, as a worker would) and serves them
// on — with no model, engine or rollouts. What `stoa bench swarm` runs by the dozen on two
// cores, and what a machine that only wants to help spread the weights can run.
//
// It prints one line per version it comes to hold, with its swarm counters:
//   holding version 7 (patch, 16.0 MiB; swarm: 11.2 MiB from peers, 4.8 MiB from the hub,
//   served 9.6 MiB to 3 peers, 2 fallbacks)
// and the same counters as JSON on its last line when it stops.
#pragma once
#include <atomic>

#include "roles/worker/worker.h"

namespace stoa::worker {

// Runs until `stop` (or options.max_minutes); throws as run_worker does for a refused join.
void run_sync_only(const WorkerOptions& options, const std::atomic<bool>& stop);

}  // namespace stoa::worker
