#include "engine/moe.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "engine/scratch.h"

namespace stoa::engine {

void moe_route(const float* router_logits, int64_t num_experts, const float* expert_bias,
               int64_t top_k, bool norm_topk_prob, double routed_scaling_factor,
               int32_t* experts_out, float* weights_out) {
  thread_local std::vector<float> score_buf, biased_buf;
  thread_local std::vector<int32_t> order_buf;
  float* score = scratch(score_buf, static_cast<size_t>(num_experts));
  float* biased = scratch(biased_buf, static_cast<size_t>(num_experts));
  for (int64_t e = 0; e < num_experts; ++e) {
    score[e] = 1.0f / (1.0f + std::exp(-router_logits[e]));
    biased[e] = expert_bias ? score[e] + expert_bias[e] : score[e];
  }
  int32_t* order = scratch(order_buf, static_cast<size_t>(num_experts));
  std::iota(order, order + num_experts, 0);
  std::partial_sort(order, order + top_k, order + num_experts, [&](int32_t a, int32_t b) {
    return biased[a] != biased[b] ? biased[a] > biased[b] : a < b;
  });
  // The bias only steers the choice (load balancing); the mixing weights are the raw scores.
  float sum = 0;
  for (int64_t i = 0; i < top_k; ++i) {
    experts_out[i] = order[i];
    weights_out[i] = score[order[i]];
    sum += weights_out[i];
  }
  // Hugging Face divides by (sum + 1e-6); llama.cpp by the sum. The difference is ~1e-6
  // relative; we follow Hugging Face, which the trainer mirrors.
  const float norm = norm_topk_prob ? 1.0f / (sum + 1e-6f) : 1.0f;
  for (int64_t i = 0; i < top_k; ++i) {
    weights_out[i] = static_cast<float>(weights_out[i] * norm * routed_scaling_factor);
  }
}

void moe_ffn(const MoeWeights& w, const float* x, int64_t tokens, int64_t hidden, float* out,
             ThreadPool& pool) {
  const int64_t E = static_cast<int64_t>(w.experts.size());
  const int64_t K = w.top_k;
  thread_local std::vector<float> logits_buf, weight_buf, xin_buf, yout_buf, row_weight_buf;
  thread_local std::vector<int32_t> chosen_buf;
  thread_local std::vector<int64_t> rows_buf;
  float* logits = scratch(logits_buf, static_cast<size_t>(tokens * E));
  w.router->forward(x, tokens, logits, pool);
  int32_t* chosen = scratch(chosen_buf, static_cast<size_t>(tokens * K));
  float* weight = scratch(weight_buf, static_cast<size_t>(tokens * K));
  for (int64_t t = 0; t < tokens; ++t) {
    moe_route(logits + t * E, E, w.expert_bias, K, w.norm_topk_prob, w.routed_scaling_factor,
              chosen + t * K, weight + t * K);
  }
  std::fill(out, out + tokens * hidden, 0.0f);
  // Expert by expert in id order, over the tokens routed to it: each expert's weights are read
  // once per pass for all its tokens, and each token's sum runs over its experts in id order
  // whatever else is in the batch, so batching never changes a result.
  std::vector<int64_t>& rows = rows_buf;
  std::vector<float>& row_weight = row_weight_buf;
  for (int64_t e = 0; e < E; ++e) {
    rows.clear();
    row_weight.clear();
    for (int64_t t = 0; t < tokens; ++t) {
      for (int64_t i = 0; i < K; ++i) {
        if (chosen[t * K + i] == e) {
          rows.push_back(t);
          row_weight.push_back(weight[t * K + i]);
        }
      }
    }
    if (rows.empty()) continue;
    const int64_t n = static_cast<int64_t>(rows.size());
    float* xin = scratch(xin_buf, static_cast<size_t>(n * hidden));
    float* yout = scratch(yout_buf, static_cast<size_t>(n * hidden));
    for (int64_t r = 0; r < n; ++r) {
      std::copy(x + rows[r] * hidden, x + (rows[r] + 1) * hidden, xin + r * hidden);
    }
    swiglu_ffn(w.experts[static_cast<size_t>(e)], xin, n, yout, pool);
    for (int64_t r = 0; r < n; ++r) {
      float* o = out + rows[r] * hidden;
      const float* y = yout + r * hidden;
      for (int64_t h = 0; h < hidden; ++h) o[h] += row_weight[r] * y[h];
    }
  }
}

}  // namespace stoa::engine
