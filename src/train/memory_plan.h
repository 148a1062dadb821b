// What one rank of the trainer holds at its peak, planned from the model's shape (torch-free):
// the same element counts the trainer keeps (fsdp_layout.h for FSDP; whole tensors for ZeRO-1
// and one process) plus an activation model of one micro-batch. `stoa bench train --plan`
// prints it for any preset, rank count and GPU size; `--measure` runs the CPU trainer at 1, 2
// and 4 ranks and compares the plan with each rank's measured peak (VmHWM growth).
#pragma once
#include <cstdint>
#include <string>

#include "core/dtype.h"
#include "model/config.h"
#include "train/lora.h"
#include "train/train_options.h"

namespace stoa::train {

struct MemoryPlanOptions {
  Sharding sharding = Sharding::kFsdp;
  int ranks = 1;
  int64_t sequences = 8;              // per optimiser step, all ranks together
  int64_t seq_len = 1024;             // tokens per sequence
  int64_t micro_batch_tokens = 8192;  // padded tokens per forward/backward chunk
  DType compute = DType::kF32;        // bf16: matmul operands cast per call
  // LoRA (rank > 0): every rank holds the whole base frozen in lora.base_dtype (no gradient, no
  // moments) and the adapters in f32 with their gradients and AdamW moments; `sharding` is not
  // used (the ranks are data-parallel replicas).
  LoraOptions lora;
};

// Bytes, per rank. The state lives through the run; the phases' transients come one at a time,
// so the peak is the state plus the largest of them.
struct RankMemoryPlan {
  int64_t frozen_base = 0;     // LoRA: the frozen base in its dtype
  int64_t masters = 0;         // f32 master weights (LoRA: the adapters)
  int64_t gradients = 0;       // f32 gradient buffers
  int64_t moments = 0;         // AdamW's two f32 moments
  int64_t gathered = 0;        // backward, FSDP: one unit gathered, its gradient, its reduce buffer
  int64_t activations = 0;     // backward: one micro-batch's kept inputs / autograd tensors, logits
  int64_t optimizer_step = 0;  // AdamW's temporaries for its largest parameter (sqrt, division)
  int64_t export_copy = 0;     // rank 0 writing the model: one tensor's copy (+ a gathered unit)
  int64_t transient() const {
    int64_t peak = gathered + activations;
    if (optimizer_step > peak) peak = optimizer_step;
    if (export_copy > peak) peak = export_copy;
    return peak;
  }
  int64_t total() const { return frozen_base + masters + gradients + moments + transient(); }
};

RankMemoryPlan plan_rank_memory(const ModelConfig& config, const MemoryPlanOptions& options);

// The largest micro-batch (in sequences of seq_len) whose plan fits `budget_bytes`; 0 if even
// the weights' state does not fit.
int64_t sequences_that_fit(const ModelConfig& config, MemoryPlanOptions options,
                           int64_t budget_bytes);

}  // namespace stoa::train
