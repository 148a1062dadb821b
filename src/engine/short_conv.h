// LFM2's gated short convolution: in_proj (H -> 3H) splits into B, C, x; Bx = B * x; a depthwise
// causal conv over time with kernel L (no bias, no activation); y = C * conv(Bx); out_proj.
// The decode state is the last L-1 values of Bx per channel (what llama.cpp keeps; Hugging Face
// keeps L but the oldest never reaches the output).
#pragma once
#include <cstdint>

#include "core/thread_pool.h"
#include "engine/batch.h"
#include "engine/linear.h"

namespace stoa::engine {

struct ShortConvWeights {
  const Linear* in_proj = nullptr;   // [3 * hidden, hidden]
  const Linear* out_proj = nullptr;  // [hidden, hidden]
  const float* kernel = nullptr;     // [hidden, L] (HF [hidden, 1, L]); kernel[L-1] hits the newest
  int64_t hidden = 0;
  int64_t kernel_size = 0;  // L
};

// x and out are [batch.size(), hidden]; updates each sequence's conv state of `layer`.
void short_conv_block(const ShortConvWeights& w, int64_t layer, const Batch& batch, const float* x,
                      float* out, ThreadPool& pool);

// One time step of the depthwise conv on one sequence: out[h] = sum_j kernel[h, j] * window_j[h]
// where the window is the L-1 stored inputs followed by bx; then the state shifts by one.
void short_conv_step(const float* kernel, int64_t hidden, int64_t kernel_size, float* state,
                     const float* bx, float* out);

}  // namespace stoa::engine
