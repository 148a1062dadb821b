// A small deterministic PRNG (SplitMix64 seeding xoshiro256**) with our own integer and real
// sampling, so that generated data is bit-identical on every platform and standard library
// (std::uniform_int_distribution and friends are implementation-defined).
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace stoa::env {

class Prng {
 public:
  explicit Prng(uint64_t seed) {
    for (auto& word : s_) word = splitmix(seed);
  }
  // A child stream, independent of how much the parent is used afterwards.
  Prng fork(uint64_t salt) const { return Prng(s_[0] ^ s_[3] ^ (salt * 0x9E3779B97F4A7C15ull)); }

  uint64_t next() {
    uint64_t result = rotl(s_[1] * 5, 7) * 9;
    uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return result;
  }
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
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
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
  static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  static uint64_t splitmix(uint64_t& state) {
    uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  uint64_t s_[4];
};

}  // namespace stoa::env
