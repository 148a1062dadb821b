#include "engine/moe.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/error.h"
#include "engine/pass_workers.h"
#include "engine/scratch.h"
#include "kernels/arith_v2.h"
#include "kernels/vec_ops.h"

namespace stoa::engine {

void moe_route(const float* router_logits, int64_t num_experts, const float* expert_bias,
               int64_t top_k, bool norm_topk_prob, double routed_scaling_factor,
               int32_t* experts_out, float* weights_out) {
  thread_local std::vector<float> score_buf, biased_buf;
  thread_local std::vector<int32_t> order_buf;
  float* score = scratch(score_buf, static_cast<size_t>(num_experts));
  float* biased = scratch(biased_buf, static_cast<size_t>(num_experts));
  for (int64_t e = 0; e < num_experts; ++e) {
    // Engine arithmetic v2: the score by v2's sigmoid, the bias added as a residual is (v2::add),
    // so the choice compares the same values on every backend.
    score[e] = kernels::v2::sigmoid(router_logits[e]);
    biased[e] = expert_bias ? kernels::v2::add(score[e], expert_bias[e]) : score[e];
  }
  int32_t* order = scratch(order_buf, static_cast<size_t>(num_experts));
  std::iota(order, order + num_experts, 0);
  std::partial_sort(order, order + top_k, order + num_experts, [&](int32_t a, int32_t b) {
    return biased[a] != biased[b] ? biased[a] > biased[b] : a < b;
  });
  // The bias only steers the choice (load balancing); the mixing weights are the raw scores,
  // normalised by v2::moe_weights: Hugging Face divides by (sum + 1e-6), llama.cpp by the sum
  // (~1e-6 relative apart); we follow Hugging Face, which the trainer mirrors. The scaling
  // factor is rounded to f32 (v1 multiplied in double).
  for (int64_t i = 0; i < top_k; ++i) experts_out[i] = order[i];
  kernels::v2::moe_weights(router_logits, experts_out, static_cast<size_t>(top_k), norm_topk_prob,
                           static_cast<float>(routed_scaling_factor), weights_out);
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
  parallel_chunks(pool, tokens, 8, 1, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      moe_route(logits + t * E, E, w.expert_bias, K, w.norm_topk_prob, w.routed_scaling_factor,
                chosen + t * K, weight + t * K);
    }
  });
  // Group the pass's (token, expert) pairs by expert, in id order, tokens ascending within an
  // expert: each expert's weights are read once per pass for all its tokens.
  thread_local std::vector<int64_t> start_buf;  // [E + 1] offsets into the grouped rows
  int64_t* start = scratch(start_buf, static_cast<size_t>(E + 1));
  std::vector<int64_t>& rows = rows_buf;
  std::vector<float>& row_weight = row_weight_buf;
  rows.clear();
  row_weight.clear();
  for (int64_t e = 0; e < E; ++e) {
    start[e] = static_cast<int64_t>(rows.size());
    for (int64_t t = 0; t < tokens; ++t) {
      for (int64_t i = 0; i < K; ++i) {
        if (chosen[t * K + i] == e) {
          rows.push_back(t);
          row_weight.push_back(weight[t * K + i]);
        }
      }
    }
  }
  start[E] = static_cast<int64_t>(rows.size());
  const int64_t N = start[E];
  const int64_t inter = E > 0 ? w.experts[0].gate->rows() : 0;
  float* xin = scratch(xin_buf, static_cast<size_t>(N * hidden));
  for (int64_t r = 0; r < N; ++r) {
    std::copy(x + rows[static_cast<size_t>(r)] * hidden,
              x + (rows[static_cast<size_t>(r)] + 1) * hidden, xin + r * hidden);
  }
  thread_local std::vector<float> g_buf, u_buf;
  thread_local std::vector<LinearJob> jobs;
  float* g = scratch(g_buf, static_cast<size_t>(N * inter));
  float* u = scratch(u_buf, static_cast<size_t>(N * inter));
  float* yout = scratch(yout_buf, static_cast<size_t>(N * hidden));
  // Every routed expert's gate and up in ONE parallel operation, then every down in another
  // (instead of two per expert): at decode sizes the per-operation handover, not the weights,
  // would dominate. Each expert's result is bit-identical to swiglu_ffn on its gathered rows.
  jobs.clear();
  for (int64_t e = 0; e < E; ++e) {
    const int64_t n = start[e + 1] - start[e];
    if (n == 0) continue;
    const SwiGluWeights& ex = w.experts[static_cast<size_t>(e)];
    STOA_CHECK(ex.gate->rows() == inter && ex.down->cols() == inter, ErrorKind::kInternal,
               "expert ", e, " has intermediate size ", ex.gate->rows(), ", expert 0 ", inter);
    jobs.push_back({ex.gate, xin + start[e] * hidden, n, g + start[e] * inter});
    jobs.push_back({ex.up, xin + start[e] * hidden, n, u + start[e] * inter});
  }
  Linear::forward_jobs(jobs, pool);
  silu_mul_over(g, u, N * inter, pool);
  jobs.clear();
  for (int64_t e = 0; e < E; ++e) {
    const int64_t n = start[e + 1] - start[e];
    if (n == 0) continue;
    jobs.push_back({w.experts[static_cast<size_t>(e)].down, g + start[e] * inter, n,
                    yout + start[e] * hidden});
  }
  Linear::forward_jobs(jobs, pool);
  // Each token's sum runs over its experts in id order whatever else is in the batch, so
  // batching never changes a result; over the pool each thread mixes a slice of the hidden
  // values of every row, rows in that order (element-wise: the same bits on any split).
  std::fill(out, out + tokens * hidden, 0.0f);
  const auto mix = [&](int64_t h0, int64_t h1) {
    for (int64_t r = 0; r < N; ++r) {
      float* o = out + rows[static_cast<size_t>(r)] * hidden;
      const float* y = yout + r * hidden;
      const float rw = row_weight[static_cast<size_t>(r)];
      kernels::mix_add(rw, y + h0, o + h0, static_cast<size_t>(h1 - h0));
    }
  };
  if (N < 8) {
    mix(0, hidden);
  } else {
    parallel_chunks(pool, hidden, 64, 16, mix);
  }
}

}  // namespace stoa::engine
