#include "engine/swiglu.h"

#include <vector>

#include "engine/ops.h"
#include "engine/scratch.h"
#include "kernels/vec_ops.h"

namespace stoa::engine {

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
  kernels::silu_mul(g, u, g, n);
  w.down->forward(g, tokens, out, pool);
}

}  // namespace stoa::engine
