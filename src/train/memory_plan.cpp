// The per-rank memory plan (memory_plan.h). The activation model counts the f32 tensors autograd
// keeps per token of a micro-batch (libtorch's saved inputs of each op of PolicyMath::block), so
// it is an estimate where the parameter state is an exact count.
#include "train/memory_plan.h"

#include <algorithm>

#include "core/error.h"
#include "model/weights.h"
#include "train/fsdp_layout.h"

namespace stoa::train {
namespace {

constexpr int64_t kF32 = 4;

// Elements autograd keeps per token for one layer's forward (the recompute of one block under
// FSDP; every block at once otherwise), and the attention scores per token and position.
int64_t layer_activation_elements(const ModelConfig& c, int64_t layer, int64_t seq_len) {
  const int64_t H = c.hidden_size;
  int64_t n = 4 * H;  // the two norms' inputs and outputs
  if (c.is_attention_layer(layer)) {
    const int64_t qkv = (c.num_heads + 2 * c.num_kv_heads) * c.head_dim;
    n += 3 * qkv + 2 * c.num_heads * c.head_dim;  // projections, q/k norms and RoPE, the output
    n += 2 * c.num_heads * seq_len;               // scores and probabilities
  } else {
    n += 3 * H + 3 * H + c.conv_kernel * H;  // in_proj, the gates, the causal conv's shifts
  }
  if (c.is_moe_layer(layer)) {
    n += c.num_experts + c.num_experts_per_tok * (4 * c.moe_intermediate_size + 2 * H);
  } else {
    n += 4 * c.intermediate_size;  // gate, up, silu, their product
  }
  return n;
}

// Tokens in one micro-batch of this rank: its sequences, at most micro_batch_tokens of them.
int64_t micro_batch_tokens(const MemoryPlanOptions& o) {
  const int64_t rank_sequences = (o.sequences + o.ranks - 1) / o.ranks;
  const int64_t per_micro = std::max<int64_t>(1, o.micro_batch_tokens / o.seq_len);
  return std::min(rank_sequences, per_micro) * o.seq_len;
}

// What autograd keeps per token without recomputation: every layer's activations and the head.
int64_t kept_elements_per_token(const ModelConfig& c, int64_t seq_len) {
  int64_t per_token = 0;
  for (int64_t l = 0; l < c.num_layers; ++l) per_token += layer_activation_elements(c, l, seq_len);
  return per_token + 4 * c.vocab_size + 2 * c.hidden_size;
}

// LoRA: the base frozen in its dtype, the adapters trained in f32 (memory_plan.h). The base
// still carries the activations' gradients, so autograd keeps what the one-process trainer
// keeps, plus each adapter's rank-wide product (and its dropped-out input when dropout > 0).
RankMemoryPlan plan_lora_memory(const ModelConfig& c, const MemoryPlanOptions& o) {
  RankMemoryPlan plan;
  int64_t base = 0, largest_tensor = 0;
  for (const TensorSpec& spec : expected_tensors(c)) {
    base += shape_numel(spec.shape);
    largest_tensor = std::max(largest_tensor, shape_numel(spec.shape));
  }
  plan.frozen_base = base * static_cast<int64_t>(dtype_size(o.lora.base_dtype));
  int64_t adapters = 0, largest_adapter = 0, adapter_inputs = 0;
  for (const LoraTarget& t : lora_targets(c, o.lora)) {
    adapters += t.adapter_numel(o.lora.rank);
    largest_adapter = std::max(largest_adapter, o.lora.rank * std::max(t.in, t.out));
    adapter_inputs += o.lora.rank + (o.lora.dropout > 0 ? t.in : 0);
  }
  // MoE experts see only their routed tokens: on average top-k of E.
  if (c.num_experts > 0) adapter_inputs = adapter_inputs * c.num_experts_per_tok / c.num_experts;
  plan.masters = kF32 * adapters;
  plan.gradients = kF32 * adapters;
  plan.moments = 2 * kF32 * adapters;
  plan.optimizer_step = 2 * kF32 * largest_adapter;
  plan.export_copy = kF32 * largest_tensor;  // a version's merged tensor, one at a time
  plan.activations =
      kF32 * (kept_elements_per_token(c, o.seq_len) + adapter_inputs) * micro_batch_tokens(o);
  if (o.compute != DType::kF32) plan.activations += plan.activations / 4;
  // A base held in another dtype than the matmuls': each weight's cast copy is kept for the
  // backward (the plan says so rather than hide it; bf16 base wants bf16 matmuls).
  if (o.compute != o.lora.base_dtype)
    plan.activations += base * static_cast<int64_t>(dtype_size(o.compute));
  return plan;
}

}  // namespace

RankMemoryPlan plan_rank_memory(const ModelConfig& c, const MemoryPlanOptions& o) {
  STOA_CHECK(o.ranks >= 1 && o.sequences >= 1 && o.seq_len >= 1, ErrorKind::kInvalidArgument,
             "memory plan: ranks, sequences and seq_len must be >= 1");
  if (o.lora.enabled()) return plan_lora_memory(c, o);
  RankMemoryPlan plan;
  const FsdpLayout layout = plan_fsdp(c, o.sharding == Sharding::kFsdp ? o.ranks : 1);
  int64_t trainable = 0, total = 0, largest_unit = 0, largest_tensor = 0;
  for (size_t i = 0; i < layout.specs.size(); ++i) {
    const int64_t n = shape_numel(layout.specs[i].shape);
    total += n;
    largest_tensor = std::max(largest_tensor, n);
    if (!layout.frozen[i]) trainable += n;
  }
  int64_t largest_piece = 0;  // FSDP: AdamW's parameters are the tensors' parts in a shard
  for (const FsdpUnit& u : layout.units) {
    largest_unit = std::max(largest_unit, u.numel);
    for (const FsdpMember& m : u.members)
      largest_piece = std::max(largest_piece, std::min(m.numel(), u.shard));
  }
  if (o.sharding == Sharding::kFsdp) {
    const int64_t shard = layout.shard_numel();
    plan.masters = kF32 * shard;
    plan.gradients = kF32 * shard;
    // The moments of the trained elements of the shard (the routing bias has none).
    plan.moments = static_cast<int64_t>(2.0 * kF32 * static_cast<double>(shard) *
                                        static_cast<double>(trainable) /
                                        static_cast<double>(std::max<int64_t>(1, total)));
    // A unit's backward: its gathered flat buffer and its members' gradients, plus (ranks > 1)
    // the buffer they are reduce-scattered through.
    plan.gathered = kF32 * largest_unit * (o.ranks > 1 ? 3 : 1);
    plan.optimizer_step = 2 * kF32 * largest_piece;
    plan.export_copy = kF32 * (largest_tensor + (o.ranks > 1 ? largest_unit : 0));
  } else {
    plan.masters = kF32 * total;
    plan.gradients = kF32 * trainable;
    plan.moments = 2 * kF32 * ((trainable + o.ranks - 1) / o.ranks);
    plan.optimizer_step = 2 * kF32 * largest_tensor;
    plan.export_copy = kF32 * largest_tensor;
  }
  const int64_t tokens = micro_batch_tokens(o);
  int64_t per_token = 0, largest_layer = 0;
  for (int64_t l = 0; l < c.num_layers; ++l) {
    const int64_t n = layer_activation_elements(c, l, o.seq_len);
    per_token += n;
    largest_layer = std::max(largest_layer, n);
  }
  if (o.sharding == Sharding::kFsdp) per_token = c.num_layers * c.hidden_size + largest_layer;
  // The head, all [tokens, vocab]: the logits and their log-softmax (kept for the backward), the
  // entropy's exp and product while it is measured, then the gradient and its scatter.
  per_token += 4 * c.vocab_size + 2 * c.hidden_size;
  plan.activations = kF32 * per_token * tokens;
  // One process, tied embedding: the head's gradient of the table and the embedding's are two
  // whole tensors before autograd adds them.
  if (o.sharding != Sharding::kFsdp && c.tie_word_embeddings)
    plan.activations += kF32 * largest_tensor;
  if (o.compute != DType::kF32) {
    // bf16 operands: a 2-byte copy of the activations' matmul inputs and of the largest weight.
    plan.activations += plan.activations / 4 + 2 * largest_unit;
  }
  return plan;
}

int64_t sequences_that_fit(const ModelConfig& config, MemoryPlanOptions options,
                           int64_t budget_bytes) {
  int64_t best = 0;
  for (int64_t s = 1; s <= (int64_t{1} << 20); s *= 2) {
    options.sequences = s * options.ranks;
    options.micro_batch_tokens = s * options.seq_len;
    if (plan_rank_memory(config, options).total() > budget_bytes) break;
    best = s;
  }
  return best;
}

}  // namespace stoa::train
