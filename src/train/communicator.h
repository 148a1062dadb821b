// INTERNAL (includes libtorch). One rank's process groups and the few collectives the data-
// parallel trainer needs, each over flat buckets so that a step costs a handful of calls whatever
// the number of tensors. c10d stays inside communicator.cpp (its headers are heavy).
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "train/distributed.h"

namespace stoa::train {

class Communicator {
 public:
  explicit Communicator(const RendezvousOptions& options);  // connects (see connect_ranks)
  ~Communicator();

  int rank() const { return options_.rank; }
  int world_size() const { return options_.world_size; }
  bool leader() const { return options_.rank == 0; }
  const RendezvousOptions& options() const { return options_; }
  CommunicatorStats& stats() { return stats_; }
  const CommunicatorStats& stats() const { return stats_; }

  // In place, summed over ranks, bucketed (tensors of one dtype and device).
  void all_reduce_sum(const std::vector<torch::Tensor>& tensors);
  void all_reduce_max(const torch::Tensor& tensor);
  // In place from `root`, bucketed; every rank passes tensors of the same shapes.
  void broadcast(const std::vector<torch::Tensor>& tensors, int root);
  // Bytes from rank 0 (the command channel): the leader's `bytes` reach every rank.
  void broadcast_bytes(std::string* bytes);
  // One value from every rank, in rank order.
  std::vector<int64_t> all_gather(int64_t value);

 private:
  struct Groups;
  void run(const std::string& what, const std::function<void()>& collective);

  RendezvousOptions options_;
  CommunicatorStats stats_;
  std::unique_ptr<Groups> groups_;
};

}  // namespace stoa::train
