// The one seeded generator in Stoa: xoshiro256** (Blackman & Vigna) seeded through splitmix64,
// with our own integer, real and normal sampling. Its outputs are identical on every machine,
// compiler and standard library, which std::mt19937's distributions and std::shuffle do not
// promise — and model init, data generation, rollout sampling, prompt order and trainer data
// order must all be reproducible from a seed.
//
// Rng(seed, stream): the four state words are splitmix64's next four outputs from
// `seed ^ (stream * kStreamMultiplier)`. Streams separate independent uses of one seed (one per
// weight tensor, one per rollout, ...). The streams of the wrappers this type replaced are all
// of this form, so what they drew is unchanged (the committed warm start, generated data, random
// models and seeded rollouts stay bit-identical): model init used exactly this mapping, the data
// generator stream 0 and fork(), the engine's sampler a fixed offset in stream space
// (engine/sampler.h).
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <utility>

namespace stoa {

// splitmix64 (Steele, Lea & Flood): the seeding sequence; also a cheap generator on its own.
inline uint64_t splitmix64(uint64_t* state) {
  uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

class Rng {
 public:
  static constexpr uint64_t kStreamMultiplier = 0xd1342543de82ef95ull;
  using State = std::array<uint64_t, 4>;

  Rng(uint64_t seed, uint64_t stream) {
    uint64_t x = seed ^ (stream * kStreamMultiplier);
    for (uint64_t& word : s_) word = splitmix64(&x);
  }
  // Continues exactly where state() was taken (checkpoints). An all-zero state never occurs
  // from seeding and would only ever produce zeros.
  static Rng from_state(const State& state) {
    Rng g(0, 0);
    g.s_ = state;
    return g;
  }
  const State& state() const { return s_; }

  // A child generator, independent of how much this one is used afterwards.
  Rng fork(uint64_t salt) const { return Rng(s_[0] ^ s_[3] ^ (salt * 0x9e3779b97f4a7c15ull), 0); }

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
  // Uniform in [0, 1) on the multiples of 2^-24 (24 random bits: exact in a float).
  float uniform_float() { return static_cast<float>(next() >> 40) * 0x1.0p-24f; }
  // Uniform in [0, n), n > 0, without modulo bias (rejection of the incomplete last block).
  uint64_t below(uint64_t n) {
    const uint64_t limit = ~uint64_t{0} - (~uint64_t{0} % n);
    uint64_t x;
    do x = next();
    while (x >= limit);
    return x % n;
  }
  // Uniform in [lo, hi], lo <= hi.
  int64_t range(int64_t lo, int64_t hi) {
    return lo + static_cast<int64_t>(below(static_cast<uint64_t>(hi - lo) + 1));
  }
  bool chance(double p) { return uniform() < p; }
  template <typename Container>
  const auto& pick(const Container& items) {
    return items[below(items.size())];
  }
  // Fisher–Yates, last position first (std::shuffle's order is implementation-defined).
  template <typename Container>
  void shuffle(Container& items) {
    using std::swap;
    for (size_t i = items.size(); i > 1; --i) swap(items[i - 1], items[below(i)]);
  }

 private:
  static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  State s_{};
};

// Natural log of x > 0 (finite), accurate to about 1 ulp, from exactly rounded operations only
// (+, *, /, frexp), because libm's log may differ between implementations in the last bit.
double portable_log(double x);

// Standard normal samples from one Rng stream: Marsaglia's polar method (pairs, handed out one
// at a time) with portable_log and sqrt (exactly rounded), so identical everywhere — the same
// seed gives the same model on a worker and on the trainer.
class NormalRng {
 public:
  NormalRng(uint64_t seed, uint64_t stream) : rng_(seed, stream) {}
  double next();
  float next_float() { return static_cast<float>(next()); }

 private:
  Rng rng_;
  double spare_ = 0.0;
  bool has_spare_ = false;
};

// 64 bits from the operating system's entropy source: the seed for what must differ between runs
// (an unseeded worker's sampler, retry jitter, join tokens).
uint64_t os_entropy();

}  // namespace stoa
