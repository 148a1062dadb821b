// A small deterministic PRNG (SplitMix64 seeding xoshiro256**) with our own integer and real
// sampling, so that generated data is bit-identical on every platform and standard library
// (std::uniform_int_distribution and friends are implementation-defined).
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/xoshiro256.h"

namespace stoa::env {

class Prng {
 public:
  explicit Prng(uint64_t seed) : g_(Xoshiro256StarStar::seeded_by_splitmix(seed)) {}
  // A child stream, independent of how much the parent is used afterwards.
  Prng fork(uint64_t salt) const {
    return Prng(g_.state()[0] ^ g_.state()[3] ^ (salt * 0x9E3779B97F4A7C15ull));
  }

  uint64_t next() { return g_.next(); }
  // Uniform in [0, n), n > 0, without modulo bias (rejection).
  uint64_t below(uint64_t n) {
    uint64_t limit = ~uint64_t{0} - (~uint64_t{0} % n);
    uint64_t x;
    do x = next();
    while (x >= limit);
    return x % n;
  }
  int range(int lo, int hi) {
    return lo + static_cast<int>(below(static_cast<uint64_t>(hi - lo + 1)));
  }
  double uniform() { return g_.uniform(); }
  bool chance(double p) { return uniform() < p; }
  template <typename T>
  const T& pick(const std::vector<T>& items) {
    return items[below(items.size())];
  }
  template <typename T>
  void shuffle(std::vector<T>& items) {
    for (size_t i = items.size(); i > 1; --i) std::swap(items[i - 1], items[below(i)]);
  }

 private:
  Xoshiro256StarStar g_;
};

}  // namespace stoa::env
