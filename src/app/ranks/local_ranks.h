// `stoa train --nproc N`: N ranks of the same command on this machine, torchrun's way (RANK,
// WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT in their environment, the TCPStore hosted by
// the launcher: the agent store), supervised until all exit.
#pragma once

namespace stoa::app {

// Starts the ranks with this process's own arguments minus --nproc. The first rank to fail stops
// the others (SIGTERM, then SIGKILL after a grace period): a dead rank never leaves the rest
// waiting. SIGINT/SIGTERM go to rank 0, which stops after its step and releases the others.
// Returns 0 when every rank exited 0, else 1.
int launch_local_ranks(int nproc);

}  // namespace stoa::app
