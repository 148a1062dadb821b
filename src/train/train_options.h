// Trainer options (torch-free): device and precision, optimiser, learning-rate schedule, loss.
#pragma once
#include <cstdint>
#include <string>

#include "core/dtype.h"
#include "train/lora.h"
#include "train/loss_config.h"

namespace stoa::train {

struct OptimizerOptions {
  double lr = 1e-6;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.0;   // decoupled (AdamW)
  double max_grad_norm = 1.0;  // ≤ 0 disables clipping (the norm is still measured)
};

enum class ScheduleKind { kConstant, kCosine };
const char* schedule_kind_name(ScheduleKind kind);
ScheduleKind parse_schedule_kind(const std::string& name);

struct ScheduleOptions {
  ScheduleKind kind = ScheduleKind::kConstant;
  int64_t warmup_steps = 0;  // linear from lr/warmup_steps up to lr over the first steps
  int64_t total_steps = 0;   // cosine: decays to min_lr_ratio·lr at total_steps (then stays)
  double min_lr_ratio = 0.0;
};

// The learning rate of optimiser step `step` (0-based).
double scheduled_lr(const OptimizerOptions& optimizer, const ScheduleOptions& schedule,
                    int64_t step);

// How the ranks of a data-parallel trainer divide the training state
// (docs/design/distributed-trainer.md). kZero1: every rank holds the f32 masters and a full
// gradient, AdamW's moments are divided by tensor. kFsdp: every rank holds 1/N of the masters,
// gradients and moments (flat shards per block), a block's parameters are gathered for its
// forward and backward and freed after, and the block is recomputed in backward (activation
// checkpointing per block comes with it).
enum class Sharding { kZero1, kFsdp };
const char* sharding_name(Sharding sharding);
Sharding parse_sharding(const std::string& name);  // "zero1" | "fsdp"; else kInvalidArgument

struct TrainOptions {
  std::string device = "cpu";            // "cpu", "cuda", "cuda:N"
  DType compute_dtype = DType::kF32;     // kBF16: matmuls in bf16 against the f32 master weights
  int threads = 0;                       // libtorch intra-op threads; 0 keeps libtorch's default
  Sharding sharding = Sharding::kZero1;  // across data-parallel ranks (one rank: same math)
  OptimizerOptions optimizer;
  ScheduleOptions schedule;
  LossConfig loss;
  int64_t micro_batch_tokens = 8192;  // padded tokens per forward/backward chunk
  int64_t max_sequence_tokens = 0;    // longest accepted sequence; 0 = max_position_embeddings
  uint64_t seed = 0;                  // data-order RNG (SFT shuffling); saved in checkpoints
  // The workers' sampling temperature: RL steps score π on logits / temperature, the distribution
  // the behaviour log-probs μ come from (otherwise every ratio π/μ would be biased by the
  // temperature alone). SFT ignores it.
  double temperature = 1.0;
  // LoRA (rank > 0): the base frozen, adapters trained (train/lora.h); one process, zero1.
  LoraOptions lora;
};

// Throws kInvalidArgument naming the option for out-of-range values.
void validate_train_options(const TrainOptions& options);

}  // namespace stoa::train
