// See fixed_math.h. Every function is a fixed sequence of double multiplies and adds (Horner),
// range reduction by constants split so that the products with small integers are exact, and
// scaling by powers of two built from the exponent bits.
#include "kernels/fixed_math.h"

#include <cstdint>
#include <cstring>
#include <limits>

namespace stoa::kernels {
namespace {

using namespace fixed_math_detail;

double from_bits(uint64_t u) {
  double d;
  std::memcpy(&d, &u, sizeof d);
  return d;
}

uint64_t to_bits(double d) {
  uint64_t u;
  std::memcpy(&u, &d, sizeof u);
  return u;
}

// 2^n for n in [-1022, 1023].
double pow2(int64_t n) {
  return from_bits(static_cast<uint64_t>(n + 1023) << 52);
}

// Round to the nearest integer (ties to even) by the 1.5 * 2^52 shifter: exact for |x| < 2^51.
double round_nearest(double x) {
  return (x + kShifter) - kShifter;
}

}  // namespace

double fixed_exp(double x) {
  if (x != x) return x;
  if (x > kExpHi) return std::numeric_limits<double>::infinity();
  if (x < kExpLo) return 0.0;
  const double n = round_nearest(x * kInvLn2);
  const double r = (x - n * kLn2Hi) - n * kLn2Lo;  // |r| <= 0.35
  // Taylor series to r^13 / 13! (the next term is below 2^-60 relative), Horner.
  double p = kExpTaylor[0];
  for (size_t k = 1; k < kExpTaylor.size(); ++k) p = p * r + kExpTaylor[k];
  // p * 2^n; n = 1024 (x above 1023.5 ln 2) as (p * 2) * 2^1023, both exact scalings. The
  // vector version (fixed_math_span.cpp) runs this same sequence in every lane.
  const double extra = n > 1023.0 ? 2.0 : 1.0;
  return (p * extra) * pow2(static_cast<int64_t>(n > 1023.0 ? 1023.0 : n));
}

double fixed_log(double x) {
  if (x != x || x < 0.0) return std::numeric_limits<double>::quiet_NaN();
  if (x == 0.0) return -std::numeric_limits<double>::infinity();
  if (x == std::numeric_limits<double>::infinity()) return x;
  int64_t e = 0;
  if (x < 2.2250738585072014e-308) {  // subnormal: scale into the normal range first
    x *= 18014398509481984.0;         // 2^54
    e = -54;
  }
  const uint64_t bits = to_bits(x);
  e += static_cast<int64_t>((bits >> 52) & 0x7ff) - 1023;
  double m = from_bits((bits & 0x000fffffffffffffULL) | 0x3ff0000000000000ULL);  // [1, 2)
  if (m > 1.4142135623730951) {
    m *= 0.5;
    ++e;
  }
  // ln m = 2 atanh(s), s = (m - 1) / (m + 1), |s| <= 0.1716: series to s^23.
  const double s = (m - 1.0) / (m + 1.0);
  const double s2 = s * s;
  double p = 1.0 / 23.0;
  for (int k = 21; k >= 1; k -= 2) p = p * s2 + 1.0 / k;
  const double ln_m = 2.0 * s * p;
  const double de = static_cast<double>(e);
  return de * kLn2Hi + (de * kLn2Lo + ln_m);
}

double fixed_pow(double base, double e) {
  return fixed_exp(e * fixed_log(base));
}

void fixed_sincos(double x, double* sin_out, double* cos_out) {
  // pi/2 in three parts of 33 bits (fdlibm's), so k * part is exact for |k| < 2^20.
  constexpr double kPio2_1 = 1.57079632673412561417e+00;
  constexpr double kPio2_2 = 6.07710050630396597660e-11;
  constexpr double kPio2_3 = 2.02226624871116645580e-21;
  constexpr double kTwoOverPi = 6.36619772367581382433e-01;
  const double k = round_nearest(x * kTwoOverPi);
  const double r = ((x - k * kPio2_1) - k * kPio2_2) - k * kPio2_3;  // |r| <= pi/4 (+ a hair)
  const double r2 = r * r;
  // Taylor series: sin to r^19, cos to r^18 (the next terms are below 2^-60 relative).
  double ps = -1.0 / 121645100408832000.0;
  ps = ps * r2 + 1.0 / 355687428096000.0;
  ps = ps * r2 - 1.0 / 1307674368000.0;
  ps = ps * r2 + 1.0 / 6227020800.0;
  ps = ps * r2 - 1.0 / 39916800.0;
  ps = ps * r2 + 1.0 / 362880.0;
  ps = ps * r2 - 1.0 / 5040.0;
  ps = ps * r2 + 1.0 / 120.0;
  ps = ps * r2 - 1.0 / 6.0;
  const double sin_r = r + r * (r2 * ps);
  double pc = 1.0 / 6402373705728000.0;
  pc = pc * r2 - 1.0 / 20922789888000.0;
  pc = pc * r2 + 1.0 / 87178291200.0;
  pc = pc * r2 - 1.0 / 479001600.0;
  pc = pc * r2 + 1.0 / 3628800.0;
  pc = pc * r2 - 1.0 / 40320.0;
  pc = pc * r2 + 1.0 / 720.0;
  pc = pc * r2 - 1.0 / 24.0;
  pc = pc * r2 + 0.5;
  const double cos_r = 1.0 - r2 * pc;
  switch (static_cast<int64_t>(k) & 3) {
    case 0:
      *sin_out = sin_r;
      *cos_out = cos_r;
      break;
    case 1:
      *sin_out = cos_r;
      *cos_out = -sin_r;
      break;
    case 2:
      *sin_out = -sin_r;
      *cos_out = -cos_r;
      break;
    default:
      *sin_out = -cos_r;
      *cos_out = sin_r;
      break;
  }
}

float fixed_expf(float x) {
  return static_cast<float>(fixed_exp(static_cast<double>(x)));
}

}  // namespace stoa::kernels
