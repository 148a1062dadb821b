#include "engine/swiglu.h"

#include <vector>

#include "engine/ops.h"

namespace stoa::engine {

void swiglu_ffn(const SwiGluWeights& w, const float* x, int64_t tokens, float* out,
                ThreadPool& pool) {
  const int64_t inter = w.gate->rows();
  std::vector<float> g(static_cast<size_t>(tokens * inter));
  std::vector<float> u(static_cast<size_t>(tokens * inter));
  w.gate->forward(x, tokens, g.data(), pool);
  w.up->forward(x, tokens, u.data(), pool);
  for (size_t i = 0; i < g.size(); ++i) g[i] = silu(g[i]) * u[i];
  w.down->forward(g.data(), tokens, out, pool);
}

}  // namespace stoa::engine
