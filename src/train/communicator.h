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
  // `values` (contiguous, `numel` elements) from `root` to the one rank that wants them: the
  // root and that rank pass the tensor, every other rank an undefined one and takes part through
  // a bucket-sized scratch buffer (Gloo broadcasts reach everyone), so no rank allocates a tensor
  // it does not keep. ZeRO-1's moments move this way (start and checkpoint).
  void send_through(const torch::Tensor& values, int64_t numel, int root);
  // Bytes from rank 0 (the command channel): the leader's `bytes` reach every rank.
  void broadcast_bytes(std::string* bytes);
  // One value from every rank, in rank order.
  std::vector<int64_t> all_gather(int64_t value);
  // FSDP: rank r's `shard` (1-D, S elements) lands in full[r·S, (r+1)·S) on every rank. One
  // broadcast per rank straight into `full` (1-D, S·world elements): no staging copy, which
  // Gloo's allgather would make.
  void all_gather_into(const torch::Tensor& full, const torch::Tensor& shard);
  // FSDP: sums `full` over the ranks in place; rank r then reads its reduce-scattered shard at
  // [r·S, (r+1)·S). An all-reduce, because the Gloo of libtorch 1.13 has no reduce-scatter for
  // CPU tensors; the buffer is one unit's gradient, freed after the scatter.
  void reduce_scatter_sum(const torch::Tensor& full);

 private:
  struct Groups;
  void run(const std::string& what, const std::function<void()>& collective);

  RendezvousOptions options_;
  CommunicatorStats stats_;
  std::unique_ptr<Groups> groups_;
};

}  // namespace stoa::train
