// Seeded random numbers that are bit-identical on every machine and standard library.
// std::normal_distribution (and libm's log/cos, which Box–Muller needs) may differ between
// implementations in the last bit, which would make "the same seed" give different models on a
// worker and on the trainer. So: splitmix64 to seed, xoshiro256** to generate, and Marsaglia's
// polar form of Box–Muller with a logarithm built from +, *, / and frexp only (all exactly
// rounded by IEEE 754, so identical everywhere; sqrt is exactly rounded too).
#pragma once
#include <cmath>
#include <cstdint>

#include "core/xoshiro256.h"

namespace stoa {

// The model-init stream: (seed, stream) → xoshiro256** state, as it has always been mapped.
class Xoshiro256 {
 public:
  Xoshiro256(uint64_t seed, uint64_t stream)
      : g_(Xoshiro256StarStar::seeded_by_splitmix(seed ^ (stream * 0xd1342543de82ef95ull))) {}
  uint64_t next() { return g_.next(); }
  // Uniform in [0, 1) with 53 random bits.
  double uniform() { return g_.uniform(); }

 private:
  Xoshiro256StarStar g_;
};

// Natural log of x > 0 (finite), accurate to about 1 ulp, from exactly rounded operations only.
inline double portable_log(double x) {
  int exponent = 0;
  double m = std::frexp(x, &exponent);  // x = m * 2^exponent, m in [0.5, 1)
  if (m < 0.70710678118654752) {
    m *= 2.0;
    exponent -= 1;
  }
  // ln m = 2 atanh(t), t = (m - 1) / (m + 1), |t| < 0.172: the series converges fast.
  // 1 / (2k + 1), rounded at compile time exactly as at run time (IEEE division).
  static constexpr double kInvOdd[13] = {1.0 / 1,  1.0 / 3,  1.0 / 5,  1.0 / 7,  1.0 / 9,
                                         1.0 / 11, 1.0 / 13, 1.0 / 15, 1.0 / 17, 1.0 / 19,
                                         1.0 / 21, 1.0 / 23, 1.0 / 25};
  double t = (m - 1.0) / (m + 1.0);
  double t2 = t * t;
  double series = kInvOdd[12];
  for (int k = 11; k >= 0; --k) series = kInvOdd[k] + t2 * series;
  return 2.0 * t * series + exponent * 0.69314718055994530942;
}

// Standard normal samples (pairs from the polar method, handed out one at a time).
class NormalRng {
 public:
  NormalRng(uint64_t seed, uint64_t stream) : rng_(seed, stream) {}
  double next() {
    if (has_spare_) {
      has_spare_ = false;
      return spare_;
    }
    double u, v, s;
    do {
      u = 2.0 * rng_.uniform() - 1.0;
      v = 2.0 * rng_.uniform() - 1.0;
      s = u * u + v * v;
    } while (s >= 1.0 || s == 0.0);
    double factor = std::sqrt(-2.0 * portable_log(s) / s);
    spare_ = v * factor;
    has_spare_ = true;
    return u * factor;
  }
  float next_float() { return static_cast<float>(next()); }

 private:
  Xoshiro256 rng_;
  double spare_ = 0.0;
  bool has_spare_ = false;
};

}  // namespace stoa
