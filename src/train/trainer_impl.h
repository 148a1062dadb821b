// INTERNAL (includes libtorch). The state behind Trainer's pimpl, shared by trainer.cpp (steps)
// and checkpoint.cpp (save/resume).
#pragma once
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "core/rng.h"
#include "train/communicator.h"
#include "train/fsdp.h"
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
  kCommandLogits,         // FSDP: a forward for Trainer::logits
  kCommandGatherWeights,  // FSDP: every tensor gathered in name order (an export)
  kCommandGatherChosen,   // FSDP: tensors gathered in the order rank 0 names them (save_model)
  kCommandSaveShards,     // FSDP: each rank writes its shard of a checkpoint
  kCommandHoldings,       // every rank's RankHoldings, gathered
};
// A CUDA trainer on rank r of a data-parallel group uses cuda:<local rank>.
TrainOptions options_for_rank(TrainOptions options, const Communicator* ranks);

struct Trainer::Impl {
  Impl(const ModelWeights& initial, const TrainOptions& options);
  Impl(const TensorSource& initial, const TrainOptions& options);  // one tensor at a time
  // FSDP: everything but the policy, which start_sharded / setup_sharded make.
  Impl(const ModelConfig& config, const TrainOptions& options);
  void start_optimizer();  // AdamW over the policy's trainable parameters
  ~Impl();                 // the leader of a data-parallel group tells the other ranks to stop

  torch::optim::AdamWOptions adamw_options() const;
  void clear_grads();
  void apply_gradients(StepMetrics* metrics, const std::string& batch_name);

  TrainOptions options;
  ModelConfig base_config;  // the model's config (FSDP builds its shards from it)
  torch::Device device;
  std::unique_ptr<PolicyModel> model;      // one copy of the policy per rank (ZeRO-1, one rank)
  std::unique_ptr<ShardedPolicy> sharded;  // or this rank's shards (FSDP)
  bool fsdp() const { return sharded != nullptr; }
  const ModelConfig& config() const { return sharded ? sharded->config() : model->config(); }
  std::vector<torch::Tensor> trainable;  // the optimiser's parameters, in model order
  std::unique_ptr<torch::optim::AdamW> optimizer;
  int64_t step = 0;
  int64_t max_tokens = 0;
  Rng rng;  // data order (Trainer::next_random); saved in checkpoints

  // The steps' bodies, run alike by every rank (the leader's public calls broadcast first).
  StepMetrics rl_step(const std::vector<RolloutGroup>& groups);
  StepMetrics supervised_step(const std::vector<SftExample>& batch);
  // What both steps do once their batch is checked (trainer.cpp): this rank keeps its share of
  // `seqs`, runs its micro-batches (`scale` per token, `topk` columns) through forward_backward
  // with `loss_of(micro_batch, logits, sums)`, takes part in the rounds of ranks with more, reduces
  // the metrics across ranks and applies AdamW. `m` comes with the batch-wide counts.
  template <typename Sequences, typename LossOf>
  StepMetrics accumulate_and_apply(Sequences seqs, StepMetrics m, double scale, int64_t topk,
                                   const LossOf& loss_of, const std::string& batch_name,
                                   std::chrono::steady_clock::time_point start);

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
  // One micro-batch: forward, the loss of the selected positions' logits, backward.
  void forward_backward(const torch::Tensor& tokens, const torch::Tensor& positions,
                        const std::function<torch::Tensor(const torch::Tensor&)>& loss_of);
  // FSDP: every rank runs as many micro-batch rounds as the rank with the most (the gathers
  // are collective), agreed before the first: the rounds for this rank's `mine` micro-batches.
  int64_t micro_batch_rounds(int64_t mine);
  void take_part(int64_t rounds);  // rounds without a micro-batch of its own

  // FSDP (fsdp_trainer.cpp). Leader: INIT to the other ranks, then the collective setup.
  void start_sharded(std::shared_ptr<Communicator> group, const TensorSource* source,
                     const std::string& resume_dir);
  // Every rank: the shards from rank 0's source, or from a sharded checkpoint.
  void setup_sharded(const TensorSource* source, const std::string& resume_dir);
  void save_shards(const std::string& dir);  // collective; <dir>/rank-R-of-N.safetensors
  void load_shards(const std::string& checkpoint);
  void gather_chosen_follower();  // the other side of Trainer::save_model
  torch::Tensor sharded_logits(const torch::Tensor& tokens);  // leader; [1, T, V]
  void gather_weights(const std::function<void(const std::string&, const torch::Tensor&)>& take);
  void save_model_sharded(const std::string& dir, DType dtype);

  RankHoldings own_holdings() const;
  std::vector<RankHoldings> gather_holdings();  // collective

  // Collective: the whole AdamW state (non-null on the leader only), as one process would have
  // it, for checkpoints that any number of ranks can resume.
  std::unique_ptr<torch::optim::AdamW> gather_optimizer();
};

}  // namespace stoa::train
