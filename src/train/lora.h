// LoRA (low-rank adapters), torch-free: which weights get adapters and their shapes, for the
// trainer (policy_model.h binds them) and the per-rank memory plan (memory_plan.h). A target
// weight W [out, in] gets A [rank, in] (random) and B [out, rank] (zero) in f32; the layer
// computes x·Wᵀ + (alpha / rank)·dropout(x)·Aᵀ·Bᵀ, so at step 0 the model is the base exactly.
// The base is frozen (no gradient, no optimiser state) and held in `base_dtype`.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "model/config.h"
#include "model/peft_adapter.h"

namespace stoa::train {

struct LoraOptions {
  int64_t rank = 0;  // 0: LoRA off (full fine-tuning)
  double alpha = 16.0;
  double dropout = 0.0;  // on the adapters' input only, training steps only
  // Module names as PEFT's target_modules: a module (a weight's name without ".weight")
  // matches a target equal to it or ending in "." + target ("q_proj", "w1", "conv.in_proj").
  // "all-linear": every matrix of the layers (attention, short conv, FFN, experts) but the
  // MoE routers and the LM head.
  std::vector<std::string> targets = {"all-linear"};
  DType base_dtype = DType::kBF16;  // the frozen base: bf16 or f32
  // A PEFT adapter directory (model/peft_adapter.h) the adapters start from instead of the
  // random A / zero B; "" for a fresh start. Its rank, alpha, targets and base must be the run's.
  // Used by a fresh trainer only: resuming a checkpoint takes the checkpoint's adapters.
  std::string init_adapter;
  bool enabled() const { return rank > 0; }
  double scale() const { return alpha / static_cast<double>(rank); }
};

// Throws kInvalidArgument naming the option for out-of-range values (a disabled LoRA passes).
void validate_lora_options(const LoraOptions& options);

struct LoraTarget {
  std::string weight;  // the base tensor's HF name ("...q_proj.weight")
  std::string module;  // the weight's name without ".weight" (PEFT's module name)
  int64_t out = 0, in = 0;
  int64_t adapter_numel(int64_t rank) const { return rank * (in + out); }
};

// The weights that get adapters, in name order; throws kInvalidArgument for a target that
// matches no matrix of the model.
std::vector<LoraTarget> lora_targets(const ModelConfig& config, const LoraOptions& options);
int64_t lora_adapter_numel(const ModelConfig& config, const LoraOptions& options);

// The adapters' tensor names, PEFT's (`<module>.lora_A.weight`, `<module>.lora_B.weight`).
std::string lora_a_name(const LoraTarget& target);
std::string lora_b_name(const LoraTarget& target);

// PEFT's target_modules for the modules `options` adapts: their last name parts ("q_proj") when
// those select the same matrices of `config` (readable, what people write), else the full module
// names.
std::vector<std::string> peft_target_modules(const ModelConfig& config, const LoraOptions& options);

// Whether a PEFT adapter (model/peft_adapter.h) can start a trainer with `options` on a base of
// `config`: the same rank and alpha, exactly the tensors lora_targets makes, each of the base's
// shape. Throws kInvalidArgument naming `source` and what differs (rank, alpha, a missing or
// extra target, a shape: another base model).
void check_peft_adapter(const PeftAdapter& adapter, const ModelConfig& config,
                        const LoraOptions& options, const std::string& source);

}  // namespace stoa::train
