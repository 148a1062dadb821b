// Engine arithmetic v2, the rest of a pass (arith_v2.h): residual adds, SwiGLU, RoPE, LFM2's short
// convolution, MoE mixing and router weights, in the order the engine's scalar code uses, with
// the summand flush on every signed sum and the tiny flush on products. Compiled with
// -ffp-contract=off.
#include <algorithm>

#include "kernels/arith_v2.h"

namespace stoa::kernels::v2 {

float add(float a, float b) {
  return flush(flush_summand(a) + flush_summand(b));  // never tiny; a NaN made canonical
}

void silu_mul(const float* gate, const float* up, float* out, size_t n) {
  for (size_t i = 0; i < n; ++i) out[i] = flush(silu(gate[i]) * flush(up[i]));
}

void rope_apply(float* head, size_t head_dim, const float* cos, const float* sin) {
  const size_t half = head_dim / 2;
  for (size_t i = 0; i < half; ++i) {
    const float c = flush(cos[i]), s = flush(sin[i]);
    const float a = flush(head[i]), b = flush(head[i + half]);
    head[i] = flush(flush_summand(a * c) - flush_summand(b * s));
    head[i + half] = flush(flush_summand(b * c) + flush_summand(a * s));
  }
}

void short_conv_step(const float* kernel, size_t hidden, size_t kernel_size, float* state,
                     const float* bx, float* out) {
  const size_t L = kernel_size;
  for (size_t h = 0; h < hidden; ++h) {
    const float* k = kernel + h * L;
    float acc = 0.0f;
    for (size_t j = 0; j + 1 < L; ++j)
      acc = acc + flush_summand(flush(k[j]) * flush(state[j * hidden + h]));
    acc = acc + flush_summand(flush(k[L - 1]) * flush(bx[h]));
    out[h] = flush(acc);
  }
  for (size_t j = 0; j + 2 < L; ++j)
    std::copy(state + (j + 1) * hidden, state + (j + 2) * hidden, state + j * hidden);
  if (L > 1) std::copy(bx, bx + hidden, state + (L - 2) * hidden);
}

void moe_mix(float weight, const float* y, float* out, size_t hidden) {
  const float w = flush(weight);
  for (size_t h = 0; h < hidden; ++h) out[h] = flush(out[h] + flush_summand(w * flush(y[h])));
}

void moe_weights(const float* router_logits, const int32_t* chosen, size_t top_k, bool normalize,
                 float scaling, float* weights) {
  float sum = 0.0f;  // non-negative terms: never tiny
  for (size_t i = 0; i < top_k; ++i) {
    weights[i] = sigmoid(router_logits[chosen[i]]);
    sum = sum + weights[i];
  }
  // Hugging Face's 1e-6 (engine/moe.cpp), as an f32 constant.
  const float norm = normalize ? recip(sum + 1e-6f) : 1.0f;
  for (size_t i = 0; i < top_k; ++i) weights[i] = flush(flush(weights[i] * norm) * scaling);
}

}  // namespace stoa::kernels::v2
