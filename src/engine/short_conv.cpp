#include "engine/short_conv.h"

#include <vector>

#include "engine/pass_workers.h"
#include "engine/scratch.h"
#include "kernels/arith_v2.h"
#include "kernels/vec_ops.h"

namespace stoa::engine {

// Engine arithmetic v2's step (kernels::v2::short_conv_step: products summand-flushed, in the
// window's order, then the window shifts).
void short_conv_step(const float* kernel, int64_t hidden, int64_t kernel_size, float* state,
                     const float* bx, float* out) {
  kernels::v2::short_conv_step(kernel, static_cast<size_t>(hidden),
                               static_cast<size_t>(kernel_size), state, bx, out);
}

void short_conv_block(const ShortConvWeights& w, int64_t layer, const Batch& batch, const float* x,
                      float* out, ThreadPool& pool) {
  const int64_t T = batch.size();
  const int64_t H = w.hidden;
  thread_local std::vector<float> bcx_buf, y_buf;
  float* bcx = scratch(bcx_buf, static_cast<size_t>(T * 3 * H));
  w.in_proj->forward(x, T, bcx, pool);

  float* y = scratch(y_buf, static_cast<size_t>(T * H));
  // Sequences over the pool (each sequence's tokens by one thread: the same bits).
  const auto segments = static_cast<int64_t>(batch.segments.size());
  parallel_chunks(pool, segments, 2, 1, [&](int64_t first, int64_t last) {
    // Declared here, not above: a block-scope thread_local is constructed by the thread that
    // passes its declaration, and the pool's threads run only this lambda.
    thread_local std::vector<float> bx_buf;
    float* bx = scratch(bx_buf, static_cast<size_t>(H));
    for (int64_t s = first; s < last; ++s) {
      const BatchSegment& seg = batch.segments[static_cast<size_t>(s)];
      float* state = seg.seq->layer(layer).conv.data();
      // Tokens of one sequence go through the conv in order: each step reads the state the
      // previous one left.
      for (int64_t i = 0; i < seg.count; ++i) {
        const int64_t t = seg.offset + i;
        const float* b = bcx + t * 3 * H;
        const float* c = b + H;
        const float* xs = b + 2 * H;
        kernels::mul_flush(b, xs, bx, static_cast<size_t>(H));
        float* yt = y + t * H;
        short_conv_step(w.kernel, H, w.kernel_size, state, bx, yt);
        kernels::mul_flush(yt, c, yt, static_cast<size_t>(H));
      }
    }
  });
  w.out_proj->forward(y, T, out, pool);
}

}  // namespace stoa::engine
