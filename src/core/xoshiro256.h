// xoshiro256** (Blackman & Vigna) with splitmix64 seeding: the one generator behind every seeded
// stream in Stoa (model init, data generation, sampling), because its outputs are identical on
// every machine, compiler and standard library — which std::mt19937's distributions do not promise.
// Each user keeps its own documented mapping from (seed, stream) to the four state words, so the
// streams it has always produced stay the same.
#pragma once
#include <array>
#include <cstdint>

namespace stoa {

inline uint64_t splitmix64(uint64_t* state) {
  uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

class Xoshiro256StarStar {
 public:
  // The four state words are splitmix64's next four outputs from `x`.
  static Xoshiro256StarStar seeded_by_splitmix(uint64_t x) {
    Xoshiro256StarStar g;
    for (uint64_t& word : g.s_) word = splitmix64(&x);
    return g;
  }

  uint64_t next() {
    const uint64_t result = rotl(s_[1] * 5, 7) * 9;
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return result;
  }
  // Uniform in [0, 1) with 53 random bits.
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
  const std::array<uint64_t, 4>& state() const { return s_; }

 private:
  static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  std::array<uint64_t, 4> s_{};
};

}  // namespace stoa
