// INTERNAL (includes libtorch). The state behind Trainer's pimpl, shared by trainer.cpp (steps)
// and checkpoint.cpp (save/resume).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "core/rng.h"
#include "train/communicator.h"
#include "train/losses.h"
#include "train/policy_model.h"
#include "train/trainer.h"

namespace stoa::train {

torch::Device parse_device(const std::string& name);  // throws for unknown or absent devices
// The command channel: what the leader's public calls broadcast before running a step's body.
enum : int {
  kCommandInit = 1,
  kCommandRlStep,
  kCommandSftStep,
  kCommandGatherOptimizer,
  kCommandStop,
};
// A CUDA trainer on rank r of a data-parallel group uses cuda:<local rank>.
TrainOptions options_for_rank(TrainOptions options, const Communicator* ranks);

struct Trainer::Impl {
  Impl(const ModelWeights& initial, const TrainOptions& options);
  ~Impl();  // the leader of a data-parallel group tells the other ranks to stop

  torch::optim::AdamWOptions adamw_options() const;
  void clear_grads();
  void apply_gradients(StepMetrics* metrics, const std::string& batch_name);

  TrainOptions options;
  torch::Device device;
  std::unique_ptr<PolicyModel> model;
  std::vector<torch::Tensor> trainable;  // the optimiser's parameters, in model order
  std::unique_ptr<torch::optim::AdamW> optimizer;
  int64_t step = 0;
  int64_t max_tokens = 0;
  Rng rng;  // data order (Trainer::next_random); saved in checkpoints

  // The steps' bodies, run alike by every rank (the leader's public calls broadcast first).
  StepMetrics rl_step(const std::vector<RolloutGroup>& groups);
  StepMetrics supervised_step(const std::vector<SftExample>& batch);

  // Data parallel (data_parallel.cpp; docs/design/distributed-trainer.md). Null: one process.
  std::shared_ptr<Communicator> ranks;
  std::vector<int> owner;  // per trainable tensor: the rank whose AdamW holds its state (ZeRO-1)
  bool diverged = false;   // a parameter-hash mismatch: every rank stops
  bool distributed() const { return ranks && ranks->world_size() > 1; }
  // Leader: makes the followers' trainers equal to this one (weights, step, AdamW state), then
  // keeps only this rank's optimizer shard. Every rank runs the collective part.
  void join(std::shared_ptr<Communicator> group);
  void exchange_state();
  void send(int command, const std::string& payload);
  void reduce_metrics(MetricSums* sums, StepMetrics* metrics);
  void sync_gradients();   // all-reduce (sum) of the gradients, bucketed
  void sync_parameters();  // each shard's owner broadcasts its updated parameters
  void check_hashes();     // every hash_check_every steps; a mismatch throws kIntegrity
  // Collective: the whole AdamW state (non-null on the leader only), as one process would have
  // it, for checkpoints that any number of ranks can resume.
  std::unique_ptr<torch::optim::AdamW> gather_optimizer();
};

}  // namespace stoa::train
