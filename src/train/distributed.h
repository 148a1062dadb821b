// Data-parallel training across ranks (torch-free header; docs/design/distributed-trainer.md).
// Ranks meet the PyTorch way: a c10d TCPStore at MASTER_ADDR:MASTER_PORT, RANK / WORLD_SIZE /
// LOCAL_RANK as torchrun sets them, Gloo process groups on CPU (NCCL for CUDA tensors when built
// against a CUDA libtorch). Rank 0 drives: its Trainer broadcasts each step's batch, the other
// ranks run Trainer::follow and take their share of the sequences.
//
//   auto ranks = train::connect_ranks(train::rendezvous_from_env());
//   if (ranks->rank() != 0) { train::Trainer::follow(ranks); return 0; }
//   train::Trainer trainer(weights, options, ranks);   // then use it as a one-process trainer
#pragma once
#include <cstdint>
#include <memory>
#include <string>

namespace stoa::train {

struct RendezvousOptions {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;                     // picks cuda:<local_rank> for a CUDA trainer
  std::string master_addr = "127.0.0.1";  // the TCPStore's host
  int master_port = 0;                    // its port
  bool agent_store = false;               // a launcher hosts the store; rank 0 is a client too
  double timeout_s = 120;                 // every collective and the rendezvous itself
  int64_t hash_check_every = 10;          // compare parameter hashes across ranks every K steps
  int64_t bucket_bytes = 25 << 20;        // gradient/parameter buckets (one collective each)
};

// From torchrun's variables: RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT,
// TORCHELASTIC_USE_AGENT_STORE; and STOA_DIST_TIMEOUT_S, STOA_DIST_HASH_EVERY. A process
// without WORLD_SIZE is one rank of one. Throws kInvalidArgument naming a malformed variable.
RendezvousOptions rendezvous_from_env();

// Timings of the collectives since the communicator was made (or since reset).
struct CommunicatorStats {
  double all_reduce_seconds = 0;  // gradient buckets
  double broadcast_seconds = 0;   // parameter shards, batches, commands
  int64_t all_reduce_bytes = 0;
  int64_t steps = 0;  // optimiser steps that synchronised
};

// The process group of one rank (defined in communicator.h, libtorch inside).
class Communicator;
int communicator_rank(const Communicator& ranks);
int communicator_world_size(const Communicator& ranks);
CommunicatorStats communicator_stats(const Communicator& ranks);

// Joins the group: blocks until all world_size ranks have arrived (or the timeout passes, which
// throws kNetwork). One rank of one needs no store.
std::shared_ptr<Communicator> connect_ranks(const RendezvousOptions& options);

// The TCPStore a launcher hosts for its ranks (torchrun's agent store): listens on a free port.
class RendezvousServer {
 public:
  explicit RendezvousServer(int world_size, double timeout_s = 120);
  ~RendezvousServer();
  RendezvousServer(const RendezvousServer&) = delete;
  RendezvousServer& operator=(const RendezvousServer&) = delete;
  int port() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace stoa::train
