// A layer's feed-forward: the dense SwiGLU MLP or, on MoE layers, the mixture of experts.
#pragma once
#include <cstdint>
#include <optional>

#include "core/thread_pool.h"
#include "engine/moe.h"
#include "engine/swiglu.h"

namespace stoa::engine {

struct FeedForward {
  SwiGluWeights dense;            // used when moe is empty
  std::optional<MoeWeights> moe;  // set on MoE layers
  // x and out are [tokens, hidden]; out must not alias x.
  void run(const float* x, int64_t tokens, float* out, ThreadPool& pool) const;
};

}  // namespace stoa::engine
