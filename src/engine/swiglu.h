// The SwiGLU MLP shared by every architecture and by each MoE expert:
// down(silu(gate(x)) * up(x)).
#pragma once
#include <cstdint>

#include "core/thread_pool.h"
#include "engine/linear.h"

namespace stoa::engine {

struct SwiGluWeights {
  const Linear* gate = nullptr;  // [inter, hidden]  (HF gate_proj / w1)
  const Linear* up = nullptr;    // [inter, hidden]  (HF up_proj / w3)
  const Linear* down = nullptr;  // [hidden, inter]  (HF down_proj / w2)
};

// gate[i] = v2::silu_mul(gate[i], up[i]) for i < n, split over the pool when n is large enough
// (element-wise: the same bits on any split). The SwiGLU of the dense MLP and of MoE experts.
void silu_mul_over(float* gate, const float* up, int64_t n, ThreadPool& pool);

// x and out are [tokens, hidden]; out must not alias x.
void swiglu_ffn(const SwiGluWeights& w, const float* x, int64_t tokens, float* out,
                ThreadPool& pool);

}  // namespace stoa::engine
