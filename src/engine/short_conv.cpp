#include "engine/short_conv.h"

#include <vector>

#include "engine/scratch.h"

namespace stoa::engine {

void short_conv_step(const float* kernel, int64_t hidden, int64_t kernel_size, float* state,
                     const float* bx, float* out) {
  const int64_t L = kernel_size;
  for (int64_t h = 0; h < hidden; ++h) {
    const float* k = kernel + h * L;
    float acc = 0;
    for (int64_t j = 0; j + 1 < L; ++j) acc += k[j] * state[j * hidden + h];
    acc += k[L - 1] * bx[h];
    out[h] = acc;
  }
  // Shift the window: drop the oldest input, append this one.
  for (int64_t j = 0; j + 2 < L; ++j) {
    std::copy(state + (j + 1) * hidden, state + (j + 2) * hidden, state + j * hidden);
  }
  if (L > 1) std::copy(bx, bx + hidden, state + (L - 2) * hidden);
}

void short_conv_block(const ShortConvWeights& w, int64_t layer, const Batch& batch, const float* x,
                      float* out, ThreadPool& pool) {
  const int64_t T = batch.size();
  const int64_t H = w.hidden;
  thread_local std::vector<float> bcx_buf, y_buf, bx_buf;
  float* bcx = scratch(bcx_buf, static_cast<size_t>(T * 3 * H));
  w.in_proj->forward(x, T, bcx, pool);

  float* y = scratch(y_buf, static_cast<size_t>(T * H));
  float* bx = scratch(bx_buf, static_cast<size_t>(H));
  for (const BatchSegment& seg : batch.segments) {
    float* state = seg.seq->layer(layer).conv.data();
    // Tokens of one sequence go through the conv in order: each step reads the state the
    // previous one left.
    for (int64_t i = 0; i < seg.count; ++i) {
      const int64_t t = seg.offset + i;
      const float* b = bcx + t * 3 * H;
      const float* c = b + H;
      const float* xs = b + 2 * H;
      for (int64_t h = 0; h < H; ++h) bx[h] = b[h] * xs[h];
      float* yt = y + t * H;
      short_conv_step(w.kernel, H, w.kernel_size, state, bx, yt);
      for (int64_t h = 0; h < H; ++h) yt[h] *= c[h];
    }
  }
  w.out_proj->forward(y, T, out, pool);
}

}  // namespace stoa::engine
