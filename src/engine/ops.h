// Element-wise building blocks shared by every architecture.
#pragma once
#include <cmath>
#include <cstdint>

#include "kernels/arith_v2.h"

namespace stoa::engine {

// Element-wise building blocks compute engine arithmetic v2 (docs/design/arithmetic.md): each is
// its kernels::v2 reference, the formula a Vulkan device reproduces bit for bit. The RoPE angles
// are a host table (double, our own pow and sincos), as the spec allows.

// out = x * rsqrt(mean(x^2) + eps) * weight, over n values (out may alias x): v2::rmsnorm_row,
// eps rounded to f32.
void rms_norm(const float* x, const float* weight, int64_t n, double eps, float* out);

// Rotary embedding, rotate-half convention (Hugging Face / llama.cpp NEOX): the pair
// (x[i], x[i + d/2]) is rotated by position * theta^(-2i/d). Applied in place to one head.
void rope_rotate_half(float* head, int64_t head_dim, int64_t position, double theta);
// The same rotation split in two, so that one position's angles (a pow and a sincos per pair,
// the costly part) serve every head of a token: rope_angles fills cos/sin[head_dim / 2] and
// rope_apply rotates one head with them. rope_apply(rope_angles(p)) == rope_rotate_half(p),
// bit for bit.
void rope_angles(int64_t head_dim, int64_t position, double theta, float* cos_out, float* sin_out);
void rope_apply(float* head, int64_t head_dim, const float* cos_in, const float* sin_in);

inline float silu(float x) {
  return kernels::v2::silu(x);
}

// In-place softmax over n values (max-subtracted): v2::softmax_row.
void softmax(float* x, int64_t n);

}  // namespace stoa::engine
