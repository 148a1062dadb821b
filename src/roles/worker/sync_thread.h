// The worker's weight-sync loop (a thread of WorkerThreads): runs WeightSync::step over and over
// (long-polling the hub and catching up to each new version), backing off on failures, until a
// stop is requested.
#pragma once
#include <stop_token>

#include "roles/worker/weight_sync.h"

namespace stoa::worker {

void run_weight_sync(WeightSync& sync, std::stop_token stop);

}  // namespace stoa::worker
