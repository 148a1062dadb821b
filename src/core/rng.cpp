#include "core/rng.h"

#include <cmath>
#include <random>

namespace stoa {

double portable_log(double x) {
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

double NormalRng::next() {
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
  const double factor = std::sqrt(-2.0 * portable_log(s) / s);
  spare_ = v * factor;
  has_spare_ = true;
  return u * factor;
}

uint64_t os_entropy() {
  std::random_device device;  // /dev/urandom (getrandom) on Linux and macOS
  return (static_cast<uint64_t>(device()) << 32) ^ device();
}

}  // namespace stoa
