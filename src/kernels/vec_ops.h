// f32 vector helpers for the forward pass (SIMD, runtime dispatch). Each result depends only on
// its inputs and n, never on other rows or threads, so they keep the batch-invariance guarantee
// of matmul_int8.h. Element-wise ops follow the rounding order of the HF/torch f32 reference
// (products rounded before sums, no fused multiply-add) so the engine can match it closely.
#pragma once
#include <cstddef>
#include <cstdint>

namespace stoa::kernels {

// out = x / sqrt(mean(x^2) + eps) * weight (weight may be null: no scaling). out may alias x.
void rmsnorm(const float* x, const float* weight, size_t n, float eps, float* out);

float dot(const float* a, const float* b, size_t n);
// y += alpha * x
void axpy(float alpha, const float* x, float* y, size_t n);

// Attention over a KV cache: out[t] = scale * dot(q, k + t * k_stride) for t < n_keys.
void attention_scores(const float* q, const float* k, size_t k_stride, size_t n_keys,
                      size_t head_dim, float scale, float* out);
// out = sum_t p[t] * v[t * v_stride + :] over t < n_keys (out is overwritten).
void attention_values(const float* p, const float* v, size_t v_stride, size_t n_keys,
                      size_t head_dim, float* out);

// In-place numerically stable softmax (max subtracted; exp accurate to ~1 ulp). -inf entries
// give 0.
void softmax(float* x, size_t n);

// log(sum_i exp(x[i])), stable (max subtracted); a token's log-prob is x[tok] - logsumexp.
// n must be >= 1; -inf entries contribute 0; all -inf gives -inf.
float logsumexp(const float* x, size_t n);

// SwiGLU: out = silu(gate) * up with silu(g) = g / (1 + exp(-g)). out may alias gate or up.
void silu_mul(const float* gate, const float* up, float* out, size_t n);

// Rotary embedding, rotate-half convention (HF Llama/Qwen/LFM2): for each of n_heads heads of
// head_dim values, with h = head_dim / 2 and i < h:
//   x[i]     = x[i] * cos[i] - x[i + h] * sin[i]
//   x[i + h] = x[i + h] * cos[i] + x[i] * sin[i]
// cos/sin hold h values (the angles of this position). head_dim must be even.
void rope_rotate_half(float* x, size_t n_heads, size_t head_dim, const float* cos,
                      const float* sin);

// Bulk conversions; f32 -> f16/bf16 round to nearest even, NaN stays NaN.
void convert_f16_to_f32(const uint16_t* in, float* out, size_t n);
void convert_f32_to_f16(const float* in, uint16_t* out, size_t n);
void convert_bf16_to_f32(const uint16_t* in, float* out, size_t n);
void convert_f32_to_bf16(const float* in, uint16_t* out, size_t n);

}  // namespace stoa::kernels
