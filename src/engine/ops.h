// Element-wise building blocks shared by every architecture.
#pragma once
#include <cmath>
#include <cstdint>

#include "kernels/fixed_math.h"

namespace stoa::engine {

// out = x / sqrt(mean(x^2) + eps) * weight, over n values (out may alias x).
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
  return x / (1.0f + kernels::fixed_expf(-x));
}

// In-place softmax over n values (max-subtracted).
void softmax(float* x, int64_t n);

}  // namespace stoa::engine
