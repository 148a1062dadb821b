// Engine arithmetic v2 (docs/design/arithmetic.md): the scalar reference of every primitive a
// backend must reproduce bit for bit. Written only in operations every conformant Vulkan device
// computes identically: f32 add / subtract / multiply rounded to nearest even and never fused,
// integer operations, comparisons of non-NaN values, integer <-> float conversions of exact
// values, and bit reinterpretation. No division, sqrt, libm call, fma or double anywhere below.
//
// Shared policies (the spec's "Special values"):
// - Tiny flush: a result whose magnitude is <= 2^-126 (a denormal, a zero of either sign, or
//   FLT_MIN itself) is returned as +0. A device that flushes denormals and one that keeps them
//   then agree, whichever side of FLT_MIN they detect tininess on. Inputs are flushed the same way
//   before use, so no operation below ever sees a denormal operand.
// - NaN: any NaN result is the canonical quiet NaN 0x7fc00000 (a GPU need not keep a NaN's
//   payload or sign). NaN and infinity are recognised by integer tests on the bits, never by
//   comparisons.
// - Summand flush: in a signed sum, a term below 2^-100 in magnitude is +0, so that no partial
//   sum is ever a denormal (flush_summand below).
//
// The CPU engine computes these formulas (its SIMD kernels equal this reference bit for bit on
// every target: vec_ops.cpp with arith_v2-inl.h, the W8A8 matmul and quantisation); so does a
// Vulkan device (src/gpu/vulkan).
#pragma once
#include <cstddef>
#include <cstdint>

#include "kernels/half.h"
#include "kernels/matmul_int8.h"

namespace stoa::kernels::v2 {

// The engine arithmetic this build computes: 2 is this file's formula (1 was v1, kernels.md's
// "Determinism contract", which fused the W8A8 step and divided). Rollouts, replay jobs, joins
// and validators carry it (net/protocol.h), so bits of two formulas are never compared.
inline constexpr int kEngineArithmetic = 2;

inline constexpr uint32_t kCanonicalNanBits = 0x7fc00000u;
// Fixed-order reductions keep this many partial sums: value i goes to partial i mod 32, then
// one tree s[j] += s[j + w] for w = 16, 8, 4, 2, 1 (kernels.md's span, so v1's sums carry over).
inline constexpr size_t kSumLanes = 32;

// The output rule on one value: the tiny flush above, and any NaN made the canonical one (two
// integer tests on the bits). Every primitive's result goes through it. Inline: the engine
// applies it per element in its scalar loops.
inline float flush(float x) {
  const uint32_t magnitude = bits_of(x) & 0x7fffffffu;
  if (magnitude > 0x7f800000u) return float_of(kCanonicalNanBits);
  return magnitude <= 0x00800000u ? 0.0f : x;
}

// 1 / x, nearly correctly rounded (measured bound in arithmetic.md). |x| <= 2^-126 gives +inf
// with x's sign; +-inf gives +0; a result <= 2^-126 in magnitude is flushed to +0.
float recip(float x);
// a / b, nearly correctly rounded, full f32 range. 0/0, inf/inf and NaN give NaN; a finite
// non-tiny a over a tiny b gives +-inf; a tiny a over non-tiny b gives +0.
float divide(float a, float b);
// 1 / sqrt(x). x <= 2^-126 in magnitude (zeros included) gives +inf, negative x gives NaN,
// +inf gives +0.
float rsqrt(float x);
// e^x: range reduction by round(x / ln 2) and Cephes expf's polynomial, mul/add only. x > 88.72
// gives +inf, results <= 2^-126 (x below about -87.34) give +0, -inf gives +0.
float exp(float x);
// 1 / (1 + e^-x) (the MoE router's score).
float sigmoid(float x);
// x / (1 + e^-x) (SwiGLU's gate), one division so one rounding after the exp.
float silu(float x);

// In place: x[i] = e^(x[i] - max) * (1 / sum), the sum in the fixed 32-lane order. A row with a
// NaN, or with no entry above -inf, becomes all NaN. n >= 1.
void softmax_row(float* x, size_t n);

// out[i] = (x[i] * r) * weight[i], r = rsqrt(sum(x^2) * (1/n) + eps), the sum of squares in the
// fixed 32-lane order; weight may be null (no scaling). out may alias x. n >= 1.
void rmsnorm_row(const float* x, const float* weight, size_t n, float eps, float* out);

// The summand flush: a term of a signed sum with |t| < 2^-100 becomes +0. Every remaining term
// is then a multiple of 2^-123, so every partial sum is zero or at least 2^-123 in magnitude and
// never tiny, whatever the signs (a sum of two close normals of opposite sign could otherwise be
// a denormal, which a flushing device would read as zero).
inline float flush_summand(float t) {
  return (bits_of(t) & 0x7fffffffu) < 0x0d800000u ? 0.0f : t;  // 0x0d800000 is 2^-100
}

// sum_i flush_summand(flush(a[i]) * flush(b[i])) in the fixed 32-lane order.
float dot(const float* a, const float* b, size_t n);

// Attention over one query and n_keys cached keys/values (head_dim values each, rows k_stride /
// v_stride apart): scores[t] = flush(dot(q, k_t) * scale); then softmax_row(scores); then
// out[d] = flush(sum over t in order of flush_summand(scores[t] * v_t[d])), starting from +0.
// scores holds n_keys floats (the probabilities on return). n_keys >= 1.
void attention_head(const float* q, const float* k, size_t k_stride, const float* v,
                    size_t v_stride, size_t n_keys, size_t head_dim, float scale, float* scores,
                    float* out);

// The rest of a pass, element-wise and in the order the engine's scalar code already uses
// (arith_v2_ops.cpp); on values whose products and sums stay far from 2^-100 they equal that
// code bit for bit. Every signed sum flushes its terms (flush_summand); products that are not
// summed are tiny-flushed.

// A residual add: flush_summand(a) + flush_summand(b).
float add(float a, float b);
// SwiGLU: out[i] = flush(silu(gate[i]) * flush(up[i])). out may alias gate or up.
void silu_mul(const float* gate, const float* up, float* out, size_t n);
// Rotary embedding (rotate-half) of one head with host-table cos/sin (head_dim / 2 each):
// x1' = x1 c - x2 s, x2' = x2 c + x1 s, each product flush_summand-ed, the results flushed.
void rope_apply(float* head, size_t head_dim, const float* cos, const float* sin);
// LFM2's short convolution for one token (engine/short_conv.cpp's order): out[h] = sum over
// j < L - 1 of k[h][j] * state[j][h], then + k[h][L-1] * bx[h]; the window then shifts by bx.
void short_conv_step(const float* kernel, size_t hidden, size_t kernel_size, float* state,
                     const float* bx, float* out);
// The MoE mixing step for one expert's output: out[h] = out[h] + flush_summand(weight * y[h]);
// a token's experts are added in expert-id order from +0.
void moe_mix(float weight, const float* y, float* out, size_t hidden);
// The MoE router's mixing weights of the chosen experts: w_i = sigmoid(logit_i); with
// normalisation, w_i = flush(w_i * recip(sum + 1e-6)) (the sum of the chosen in their order);
// then w_i = flush(w_i * scaling). `chosen` holds top_k expert ids.
void moe_weights(const float* router_logits, const int32_t* chosen, size_t top_k, bool normalize,
                 float scaling, float* weights);

// W8A8 activation quantisation per 32-block (llama.cpp's Q8_0): d = f16(amax * fl(1/127)),
// q = round-half-away(x * recip(d before f16)), clamped to [-127, 127]. A block with a NaN or an
// infinity gets scale NaN and values 0. acts.sums is filled when not null.
void quantize_q8(const float* x, int64_t x_stride, const Q8Activations& acts);

// y[b * y_stride + o] = sum over the 32-blocks g of row o, in order, of
//   acc = acc + float(isum_g) * (d_w,g * d_x,g)
// with isum_g the exact int32 block dot product, each product rounded, never fused. Every output
// row o < w.rows for every activation row b < acts.batch.
void matvec_q8(const Int8Weights& w, const Q8Activations& acts, float* y, int64_t y_stride);

}  // namespace stoa::kernels::v2
