// The trainer: a libtorch policy with f32 master weights, AdamW, a learning-rate schedule and the
// policy losses, behind a torch-free interface (pimpl) so the CLI, the hub and the PULSE bench
// never include libtorch. Plain types in and out: ModelWeights, Tensor, Rollout, SftExample.
//
//   stoa::train::Trainer trainer(stoa::random_weights(config, 1), options);
//   StepMetrics m = trainer.train_step(groups);   // one DPPO (or baseline) optimiser step
//   trainer.copy_weights_to(&weights);             // f32 weights after the step
//   trainer.save_checkpoint(dir);  auto again = Trainer::resume(dir, options);
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "model/weights.h"
#include "train/rollout.h"
#include "train/train_options.h"

namespace stoa {
class TensorSource;  // model/tensor_source.h
}

namespace stoa::train {

class Communicator;  // train/distributed.h

// One supervised sequence: cross-entropy on tokens[t] for every t with mask[t] == 1 (t ≥ 1).
struct SftExample {
  std::string id;
  std::vector<int32_t> tokens;
  std::vector<uint8_t> mask;
};

struct StepMetrics {
  int64_t step = 0;   // optimiser steps taken after this one
  double lr = 0.0;    // learning rate used by this step
  double loss = 0.0;  // the aggregated loss that was differentiated
  int64_t sequences = 0;
  int64_t tokens = 0;        // trainable (loss) tokens
  int64_t tokens_total = 0;  // all tokens forwarded (incl. prompts/observations, excl. padding)
  // Trust-region mask: fraction of trainable tokens dropped, overall and per advantage sign.
  double masked_fraction = 0.0;
  double masked_fraction_pos = 0.0;  // among tokens with A > 0
  double masked_fraction_neg = 0.0;  // among tokens with A ≤ 0
  // Divergence between π (trainer) and μ (behaviour) per trainable token: the top-K TV/KL where
  // the rollout reported top-K, the binary (sampled token vs rest) ones otherwise.
  double tv_mean = 0.0, tv_max = 0.0;
  double kl_mean = 0.0, kl_max = 0.0;
  double chi2 = 0.0;          // mean (p/μ − 1)² (untruncated ratio)
  double pearson_p_mu = 0.0;  // correlation of p and μ over the trainable tokens
  double log_ppl_diff = 0.0;  // mean (log μ − log p)
  double entropy = 0.0;       // mean entropy of π over the trainable positions (nats)
  double grad_norm = 0.0;     // before clipping
  double seconds = 0.0;
  double tokens_per_second = 0.0;  // tokens_total / seconds
};

// What one rank keeps of the training state, in elements (the accounting that
// `stoa bench train --plan` predicts from): f32 masters, gradient buffers, AdamW moments (two per
// parameter once a step has run).
struct RankHoldings {
  int64_t masters = 0;  // with LoRA: the frozen base's elements (in its dtype)
  int64_t gradients = 0;
  int64_t moments = 0;
};

class Trainer {
 public:
  // Copies `initial` (f32) to the device. Throws for a bad device/options or a weight set that
  // does not match its config. With `ranks` (rank 0 of a group of N > 1; train/distributed.h)
  // the trainer is data parallel: the other ranks run follow(), every step's sequences split
  // across the ranks, gradients are all-reduced and AdamW's state is sharded (ZeRO-1). Used
  // exactly like a one-process trainer; destroying it stops the followers.
  Trainer(const ModelWeights& initial, const TrainOptions& options,
          std::shared_ptr<Communicator> ranks = nullptr);
  // The same from a source read one tensor at a time. With `options.sharding` = kFsdp (fully
  // sharded: each rank keeps 1/N of the masters, gradients and moments) no rank ever holds a
  // whole f32 copy: rank 0 reads a unit's tensors and every rank keeps its slice.
  Trainer(const TensorSource& initial, const TrainOptions& options,
          std::shared_ptr<Communicator> ranks = nullptr);
  ~Trainer();
  Trainer(Trainer&&) noexcept;
  Trainer& operator=(Trainer&&) noexcept;

  const ModelConfig& config() const;
  const TrainOptions& options() const;
  int64_t step_count() const;  // optimiser steps taken
  // The longest transcript train_step takes (max_sequence_tokens, else the model's context).
  int64_t max_tokens() const;

  // One policy-gradient step over all rollouts of all groups (gradient accumulation over
  // micro-batches). Every rollout is validated first; a bad one throws a stoa::Error naming it
  // and leaves weights, optimiser state and step count untouched. A non-finite loss or gradient
  // is likewise rejected before the optimiser runs.
  StepMetrics train_step(const std::vector<RolloutGroup>& groups);
  // One supervised step: token-mean cross-entropy over the masked tokens of `batch`.
  StepMetrics sft_step(const std::vector<SftExample>& batch);

  // Forward only (no gradients): the model's raw f32 logits [tokens.size(), vocab] of one
  // sequence (before any sampling temperature; what the engine parity tests compare).
  Tensor logits(const std::vector<int32_t>& tokens) const;
  // Forward only: log π(tokens[t] | tokens[<t]) for t ≥ 1 (entry 0 is 0), π at the options'
  // sampling temperature — the distribution train_step optimises and workers sample.
  std::vector<float> token_logprobs(const std::vector<int32_t>& tokens) const;

  ModelWeights weights() const;                   // f32 copy (HF names)
  void copy_weights_to(ModelWeights* out) const;  // reuses out's buffers when shapes match
  // Every f32 master tensor once, in name order, one at a time: `take(name, shape, values)` sees
  // the parameter's own storage when it is on the CPU, else one tensor's host copy (freed after
  // the call). What a version is made from without a second copy of the model (pulse/publisher.h).
  void for_each_weight(
      const std::function<void(const std::string&, const Shape&, const float*)>& take) const;
  // The model as a TensorSource (LoRA: merged), one f32 tensor made per call, for the exports
  // (model/hf_export.h). Lives no longer than the trainer; not for an fsdp trainer.
  std::unique_ptr<TensorSource> model_source() const;
  // Hugging Face model directory (config.json + model.safetensors) at `dtype` (LoRA: merged).
  void save_model(const std::string& dir, DType dtype = DType::kF32) const;

  // LoRA (options().lora): every adapter tensor (A then B per target, PEFT's names), f32. None
  // without LoRA. for_each_weight and the other exports give the merged W + (alpha/rank)·B·A.
  void for_each_adapter(
      const std::function<void(const std::string&, const Shape&, const float*)>& take) const;
  // The hash of the model's own tensors as held (with LoRA: the frozen base, in its dtype; the
  // names, dtypes, shapes and bytes), recomputed on every call. One process only.
  std::string base_hash() const;

  // Exact checkpoint: f32 weights (safetensors), AdamW moments and step, schedule position, the
  // data-order RNG. Written to dir.tmp then renamed, so a crash never leaves half a checkpoint.
  void save_checkpoint(const std::string& dir) const;
  // Rebuilds a trainer from save_checkpoint's directory; continuing from it is bit-identical to
  // never having stopped (same options, same device and thread count).
  // A checkpoint from any number of ranks resumes on any number (`ranks` as in the constructor).
  static Trainer resume(const std::string& dir, const TrainOptions& options,
                        std::shared_ptr<Communicator> ranks = nullptr);
  // A LoRA checkpoint holds only the adapters, their AdamW state and the base's hash: it resumes
  // on `base` (the model the run started from), refused with kIntegrity if its hash differs.
  // The checkpoint's rank, alpha and targets win over `options.lora`'s. Any number of
  // data-parallel ranks resumes it, as the constructor's `ranks` (the base is broadcast).
  static Trainer resume(const std::string& dir, const TensorSource& base, TrainOptions options,
                        std::shared_ptr<Communicator> ranks = nullptr);
  // A rank other than 0: receives rank 0's trainer, then runs every step rank 0 broadcasts until
  // its trainer is destroyed. Throws kNetwork when a rank dies or times out, kIntegrity when the
  // ranks' parameters diverge.
  static void follow(std::shared_ptr<Communicator> ranks);

  // Every rank's holdings, in rank order (collective under data parallelism). ZeRO-1: full
  // masters and gradients on every rank, the moments divided; FSDP: all three divided.
  std::vector<RankHoldings> holdings() const;

  // The data-order RNG (SFT shuffling); part of the checkpoint.
  uint64_t next_random();

 private:
  struct Impl;
  explicit Trainer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace stoa::train
