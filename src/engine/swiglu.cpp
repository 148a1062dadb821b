#include "engine/swiglu.h"

#include <vector>

#include "engine/ops.h"
#include "engine/pass_workers.h"
#include "engine/scratch.h"
#include "kernels/vec_ops.h"

namespace stoa::engine {

void silu_mul_over(float* gate, const float* up, int64_t n, ThreadPool& pool) {
  parallel_chunks(pool, n, 4096, 16, [&](int64_t begin, int64_t end) {
    kernels::silu_mul(gate + begin, up + begin, gate + begin, static_cast<size_t>(end - begin));
  });
}

void swiglu_ffn(const SwiGluWeights& w, const float* x, int64_t tokens, float* out,
                ThreadPool& pool) {
  const int64_t inter = w.gate->rows();
  const auto n = static_cast<size_t>(tokens * inter);
  thread_local std::vector<float> g_buf, u_buf;
  float* g = scratch(g_buf, n);
  float* u = scratch(u_buf, n);
  {
    // One quantisation of x and one parallel operation for both projections.
    const Linear* gate_up[2] = {w.gate, w.up};
    float* outs[2] = {g, u};
    Linear::forward_group(gate_up, x, tokens, outs, pool);
  }
  silu_mul_over(g, u, static_cast<int64_t>(n), pool);
  w.down->forward(g, tokens, out, pool);
}

}  // namespace stoa::engine
