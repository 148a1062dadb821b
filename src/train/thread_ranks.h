// Ranks as threads of one process (torch-free interface): each rank its own Gloo group over a
// loopback TCPStore, so the collectives are those of separate processes. `stoa bench train
// --nproc` measures data-parallel scaling this way, and the trainer tests check the ranks'
// update against the one-process trainer's.
#pragma once
#include <functional>
#include <memory>

#include "train/distributed.h"

namespace stoa::train {

// Rank 0 runs `leader` on the calling thread (it builds its Trainer with the communicator it is
// given); ranks 1..world-1 run Trainer::follow on threads of their own. Returns once every rank
// has ended and rethrows the first rank's error. `base` gives the collectives' timeout and the
// hash-check cadence (its rank, world size and port are set here).
void run_thread_ranks(int world, const std::function<void(std::shared_ptr<Communicator>)>& leader,
                      RendezvousOptions base = {});

}  // namespace stoa::train
