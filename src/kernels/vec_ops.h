// f32 vector helpers for the forward pass (SIMD, runtime dispatch). Each result depends only on
// its inputs and n, never on other rows or threads, so they keep the batch-invariance guarantee
// of matmul_int8.h. Element-wise ops follow the rounding order of the HF/torch f32 reference
// (products rounded before sums, no fused multiply-add) so the engine can match it closely.
// The ones a forward pass uses (RMSNorm, attention, softmax, SwiGLU, the residual and mixing
// adds, the gate products) compute engine arithmetic v2 (docs/design/arithmetic.md): the same
// bits as kernels::v2 (arith_v2.h) on every target; dot and axpy are the earlier formulas, kept
// for the tests and tools that call them.
#pragma once
#include <cstddef>
#include <cstdint>
#include <limits>

namespace stoa::kernels {

// out = x * rsqrt(mean(x^2) + eps) * weight (weight may be null: no scaling): v2::rmsnorm_row.
// out may alias x.
void rmsnorm(const float* x, const float* weight, size_t n, float eps, float* out);

float dot(const float* a, const float* b, size_t n);
// y += alpha * x
void axpy(float alpha, const float* x, float* y, size_t n);

// Attention over a KV cache: out[t] = flush(v2::dot(q, k + t * k_stride) * scale), t < n_keys.
// q, k and (below) v must be flushed already (v2::flush(x) == x for each value), as the engine's
// are (RoPE's outputs, the W8A8 product's): the kernels do not flush them again. key_floor, when
// given, is a lower bound on every nonzero |k| (min_nonzero_magnitude of the cache, or less): where
// it proves that no product q_i * k_i can lie in (0, 2^-100) the summand flush is skipped, since
// it cannot change a term (0: no bound, every product is flushed; the bits are the same either
// way). Defined in attention_v2.cpp, with softmax.
void attention_scores(const float* q, const float* k, size_t k_stride, size_t n_keys,
                      size_t head_dim, float scale, float* out, float key_floor = 0.0f);
// out = flush(sum_t flush_summand(p[t] * flush(v[t * v_stride + :]))) over t < n_keys in order
// (out is overwritten); with attention_scores and softmax, v2::attention_head. value_floor: a
// lower bound on every nonzero |v|, as key_floor above. value_ceiling: an upper bound on every
// |v| (+inf: none, or a non-finite value): when finite, a key with p[t] = 0 is skipped, since its
// terms are then zeros (an infinite or NaN value would make 0 * v a NaN that must reach out).
void attention_values(const float* p, const float* v, size_t v_stride, size_t n_keys,
                      size_t head_dim, float* out, float value_floor = 0.0f,
                      float value_ceiling = std::numeric_limits<float>::infinity());
// The smallest nonzero |x[i]| over x[0..n) (+inf when none; NaNs and infinities count as large):
// the floors above.
float min_nonzero_magnitude(const float* x, size_t n);
// The largest |x[i]| over x[0..n) (0 when n = 0; +inf when any is infinite or NaN): the
// ceiling above.
float max_magnitude(const float* x, size_t n);

// In-place softmax, v2::softmax_row (max subtracted; v2's exp; one reciprocal of the fixed sum).
// -inf entries give 0; a NaN, or no finite entry, makes the row NaN.
void softmax(float* x, size_t n);

// log(sum_i exp(x[i])), stable (max subtracted); a token's log-prob is x[tok] - logsumexp.
// n must be >= 1; -inf entries contribute 0; all -inf gives -inf.
float logsumexp(const float* x, size_t n);

// SwiGLU, v2::silu_mul: out = flush(silu(gate) * flush(up)), silu(g) = g / (1 + exp(-g)) by
// v2's exp and division. out may alias gate or up.
void silu_mul(const float* gate, const float* up, float* out, size_t n);
// The residual add, v2::add per element: y = flush(flush_summand(y) + flush_summand(delta)).
void residual_add(float* y, const float* delta, size_t n);
// One MoE expert's share, v2::moe_mix: out = flush(out + flush_summand(flush(w) * flush(y))).
void mix_add(float w, const float* y, float* out, size_t n);
// A gate product: out = flush(flush(a) * flush(b)). out may alias a or b.
void mul_flush(const float* a, const float* b, float* out, size_t n);

// Rotary embedding, rotate-half convention (HF Llama/Qwen/LFM2), v2::rope_apply on each of
// n_heads heads of head_dim values: with h = head_dim / 2 and i < h,
//   x[i]     = x[i] * cos[i] - x[i + h] * sin[i]
//   x[i + h] = x[i + h] * cos[i] + x[i] * sin[i]
// every input flushed, each product summand-flushed, each result flushed (on ordinary values:
// the plain formula's bits). cos/sin hold h values (the angles of this position). head_dim must
// be even.
void rope_rotate_half(float* x, size_t n_heads, size_t head_dim, const float* cos,
                      const float* sin);

// Bulk conversions; f32 -> f16/bf16 round to nearest even, NaN stays NaN.
void convert_f16_to_f32(const uint16_t* in, float* out, size_t n);
void convert_f32_to_f16(const float* in, uint16_t* out, size_t n);
void convert_bf16_to_f32(const uint16_t* in, float* out, size_t n);
void convert_f32_to_bf16(const float* in, uint16_t* out, size_t n);

}  // namespace stoa::kernels
