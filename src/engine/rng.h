// A small seeded PRNG (xoshiro256**, seeded through splitmix64): the same (seed, stream) gives
// the same numbers on every machine and compiler, which std::mt19937's distributions do not
// promise. `stream` separates independent generators under one seed (one per rollout).
#pragma once
#include <cstdint>

#include "core/xoshiro256.h"

namespace stoa::engine {

class Rng {
 public:
  explicit Rng(uint64_t seed, uint64_t stream = 0);
  uint64_t next_u64();
  double uniform();  // [0, 1) with 53 random bits

 private:
  Xoshiro256StarStar g_;
};

}  // namespace stoa::engine
