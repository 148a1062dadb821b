// The worker's weight-sync loop (a thread of WorkerThreads): runs WeightSync::step over and over
// (long-polling the hub and catching up to each new version), backing off on failures, until a
// stop is requested.
#pragma once
#include <stop_token>

#include "roles/worker/hub_contact.h"
#include "roles/worker/weight_sync.h"

namespace stoa::worker {

// `contact` (may be null) is told whether each step reached the hub; an unreachable hub's
// failures then go to the detailed log after the first (the volunteer reads it from the report).
void run_weight_sync(WeightSync& sync, std::stop_token stop, HubContact* contact = nullptr);

}  // namespace stoa::worker
