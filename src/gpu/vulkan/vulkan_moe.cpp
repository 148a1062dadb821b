// The Vulkan backend's MoE feed-forward (vulkan_backend.h): engine/moe.cpp's moe_ffn with the
// experts' products on the device. The routing and the mixing run on the host with the CPU
// engine's own functions (moe_route, kernels::mix_add) on the pass's values, so both are the
// CPU's bits by construction; the device computes what moe_ffn gives its Linear jobs: each
// expert's gate, up and down over the pass's (token, expert) rows grouped by expert.
#include <algorithm>
#include <cstring>
#include <vector>

#include "core/thread_pool.h"
#include "engine/moe.h"
#include "gpu/vulkan/vulkan_backend.h"
#include "kernels/matmul_int8.h"
#include "kernels/vec_ops.h"

namespace stoa::gpu::vulkan {

void VulkanBackend::record_moe(const Layer& layer) {
  const ModelConfig& c = config();
  const int64_t T = pass_tokens_, H = c.hidden_size;
  const auto E = static_cast<int64_t>(layer.experts.size());
  const int64_t K = c.num_experts_per_tok;
  const int64_t inter = layer.experts.front().gate->rows;
  constexpr int64_t kBlock = kernels::kQ8Block;

  // The normed input reaches the host: the router and the choice, as moe_ffn makes them.
  pass_.submit_and_wait();
  const auto* normed = static_cast<const float*>(normed_.data());
  std::vector<float> router_logits(static_cast<size_t>(T * E));
  layer.router->forward(normed, T, router_logits.data(), ThreadPool::global());
  std::vector<int32_t> chosen(static_cast<size_t>(T * K));
  std::vector<float> weight(static_cast<size_t>(T * K));
  for (int64_t t = 0; t < T; ++t)
    engine::moe_route(router_logits.data() + t * E, E, layer.expert_bias, K, c.norm_topk_prob,
                      c.routed_scaling_factor, chosen.data() + t * K, weight.data() + t * K);
  // The (token, expert) rows grouped by expert in id order, tokens ascending within one.
  std::vector<int64_t> start(static_cast<size_t>(E + 1)), rows;
  std::vector<float> row_weight;
  for (int64_t e = 0; e < E; ++e) {
    start[static_cast<size_t>(e)] = static_cast<int64_t>(rows.size());
    for (int64_t t = 0; t < T; ++t)
      for (int64_t i = 0; i < K; ++i)
        if (chosen[static_cast<size_t>(t * K + i)] == e) {
          rows.push_back(t);
          row_weight.push_back(weight[static_cast<size_t>(t * K + i)]);
        }
  }
  start[static_cast<size_t>(E)] = static_cast<int64_t>(rows.size());
  const auto N = static_cast<int64_t>(rows.size());  // T * K

  // The experts on the device: the rows gathered, quantised once, each expert's SwiGLU on its.
  auto* expert_in = static_cast<float*>(expert_in_.data());
  for (int64_t r = 0; r < N; ++r)
    std::memcpy(expert_in + r * H, normed + rows[static_cast<size_t>(r)] * H,
                static_cast<size_t>(H) * sizeof(float));
  pass_.begin();
  quantize_.record(pass_, expert_in_, act_values_, act_scales_, act_sums_,
                   static_cast<uint32_t>(N * H / kBlock));
  for (int64_t e = 0; e < E; ++e) {
    const int64_t first = start[static_cast<size_t>(e)];
    const int64_t n = start[static_cast<size_t>(e) + 1] - first;
    if (n == 0) continue;
    const Layer::Expert& ex = layer.experts[static_cast<size_t>(e)];
    matvec_.record(pass_, *ex.gate, act_values_, act_scales_, gate_, static_cast<uint32_t>(n),
                   static_cast<uint32_t>(inter), static_cast<uint32_t>(first));
    matvec_.record(pass_, *ex.up, act_values_, act_scales_, up_, static_cast<uint32_t>(n),
                   static_cast<uint32_t>(inter), static_cast<uint32_t>(first));
  }
  ops_.record(pass_, V2PassOp::kSiluMul, static_cast<uint32_t>(N * inter), 0, 0, 0.0f, gate_, up_,
              unused_, unused_, swiglu_);
  quantize_.record(pass_, swiglu_, act_values_, act_scales_, act_sums_,
                   static_cast<uint32_t>(N * inter / kBlock));
  for (int64_t e = 0; e < E; ++e) {
    const int64_t first = start[static_cast<size_t>(e)];
    const int64_t n = start[static_cast<size_t>(e) + 1] - first;
    if (n == 0) continue;
    matvec_.record(pass_, *layer.experts[static_cast<size_t>(e)].down, act_values_, act_scales_,
                   expert_out_, static_cast<uint32_t>(n), static_cast<uint32_t>(H),
                   static_cast<uint32_t>(first));
  }
  pass_.submit_and_wait();

  // Each token's sum over its experts in id order, as moe_ffn mixes.
  auto* delta = static_cast<float*>(delta_.data());
  const auto* expert_out = static_cast<const float*>(expert_out_.data());
  std::fill(delta, delta + T * H, 0.0f);
  for (int64_t r = 0; r < N; ++r)
    kernels::mix_add(row_weight[static_cast<size_t>(r)], expert_out + r * H,
                     delta + rows[static_cast<size_t>(r)] * H, static_cast<size_t>(H));
  pass_.begin();
}

}  // namespace stoa::gpu::vulkan
