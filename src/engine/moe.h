// LFM2-MoE's sparse feed-forward (reference.md section 4): router = sigmoid(gate(x)); experts are
// chosen by top-k of sigmoid + expert_bias, but weighted by the sigmoid scores WITHOUT the bias,
// normalised to sum 1 (norm_topk_prob) and times routed_scaling_factor. No shared expert.
#pragma once
#include <cstdint>
#include <vector>

#include "core/thread_pool.h"
#include "engine/linear.h"
#include "engine/swiglu.h"

namespace stoa::engine {

struct MoeWeights {
  const Linear* router = nullptr;      // [experts, hidden], kept f32 like llama.cpp
  const float* expert_bias = nullptr;  // [experts] or null (use_expert_bias false)
  std::vector<SwiGluWeights> experts;
  int64_t top_k = 0;
  bool norm_topk_prob = true;
  double routed_scaling_factor = 1.0;
};

// Routing of one token from its router logits [num_experts]: writes top_k expert ids (highest
// biased score first, ties to the lower id) and their weights.
void moe_route(const float* router_logits, int64_t num_experts, const float* expert_bias,
               int64_t top_k, bool norm_topk_prob, double routed_scaling_factor,
               int32_t* experts_out, float* weights_out);

// x and out are [tokens, hidden]; out must not alias x.
void moe_ffn(const MoeWeights& w, const float* x, int64_t tokens, int64_t hidden, float* out,
             ThreadPool& pool);

}  // namespace stoa::engine
