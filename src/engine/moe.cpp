#include "engine/moe.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace stoa::engine {

void moe_route(const float* router_logits, int64_t num_experts, const float* expert_bias,
               int64_t top_k, bool norm_topk_prob, double routed_scaling_factor,
               int32_t* experts_out, float* weights_out) {
  std::vector<float> score(static_cast<size_t>(num_experts));
  std::vector<float> biased(static_cast<size_t>(num_experts));
  for (int64_t e = 0; e < num_experts; ++e) {
    score[e] = 1.0f / (1.0f + std::exp(-router_logits[e]));
    biased[e] = expert_bias ? score[e] + expert_bias[e] : score[e];
  }
  std::vector<int32_t> order(static_cast<size_t>(num_experts));
  std::iota(order.begin(), order.end(), 0);
  std::partial_sort(order.begin(), order.begin() + top_k, order.end(), [&](int32_t a, int32_t b) {
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
  std::vector<float> logits(static_cast<size_t>(tokens * E));
  w.router->forward(x, tokens, logits.data(), pool);
  std::vector<int32_t> chosen(static_cast<size_t>(tokens * K));
  std::vector<float> weight(static_cast<size_t>(tokens * K));
  for (int64_t t = 0; t < tokens; ++t) {
    moe_route(logits.data() + t * E, E, w.expert_bias, K, w.norm_topk_prob, w.routed_scaling_factor,
              chosen.data() + t * K, weight.data() + t * K);
  }
  std::fill(out, out + tokens * hidden, 0.0f);
  // Expert by expert in id order, over the tokens routed to it: each token's sum runs over its
  // experts in id order whatever else is in the batch, so batching never changes a result.
  std::vector<float> xin, yout;
  std::vector<int64_t> rows;
  std::vector<float> row_weight;
  for (int64_t e = 0; e < E; ++e) {
    rows.clear();
    row_weight.clear();
    for (int64_t t = 0; t < tokens; ++t) {
      for (int64_t i = 0; i < K; ++i) {
        if (chosen[static_cast<size_t>(t * K + i)] == e) {
          rows.push_back(t);
          row_weight.push_back(weight[static_cast<size_t>(t * K + i)]);
        }
      }
    }
    if (rows.empty()) continue;
    const int64_t n = static_cast<int64_t>(rows.size());
    xin.resize(static_cast<size_t>(n * hidden));
    yout.resize(static_cast<size_t>(n * hidden));
    for (int64_t r = 0; r < n; ++r) {
      std::copy(x + rows[r] * hidden, x + (rows[r] + 1) * hidden, xin.begin() + r * hidden);
    }
    swiglu_ffn(w.experts[static_cast<size_t>(e)], xin.data(), n, yout.data(), pool);
    for (int64_t r = 0; r < n; ++r) {
      float* o = out + rows[r] * hidden;
      const float* y = yout.data() + r * hidden;
      for (int64_t h = 0; h < hidden; ++h) o[h] += row_weight[r] * y[h];
    }
  }
}

}  // namespace stoa::engine
