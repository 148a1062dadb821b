#include "engine/ffn.h"

namespace stoa::engine {

void FeedForward::run(const float* x, int64_t tokens, float* out, ThreadPool& pool) const {
  if (moe) {
    moe_ffn(*moe, x, tokens, moe->router->cols(), out, pool);
  } else {
    swiglu_ffn(dense, x, tokens, out, pool);
  }
}

}  // namespace stoa::engine
