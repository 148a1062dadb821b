// The one scalar f16 / bf16 conversion (kernels/half.h, which core/dtype.h forwards to) against
// a slow scalar reference written from the IEEE 754 definitions: the nearest representable value
// found by comparing distances in double (ties to the even neighbour), NaN quiet with sign and
// top payload kept, inf, overflow, and every subnormal.
#include "kernels/half.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "core/dtype.h"
#include "core/rng.h"

namespace stoa::kernels {
namespace {

double f16_value(uint16_t magnitude_bits) {  // a finite f16 magnitude, exactly
  const int e = (magnitude_bits >> 10) & 0x1f;
  const int m = magnitude_bits & 0x3ff;
  return e == 0 ? std::ldexp(m, -24) : std::ldexp(1024 + m, e - 25);
}

float reference_f16_to_f32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  if (e == 0x1f) return float_of(sign | 0x7f800000u | (m ? 0x400000u | (m << 13) : 0u));
  const float magnitude = static_cast<float>(f16_value(h & 0x7fffu));
  return sign ? -magnitude : magnitude;
}

// The nearest of two neighbours lo < x < hi (as bit patterns lo_bits, lo_bits + 1), ties to even.
uint32_t nearest(double x, double lo, double hi, uint32_t lo_bits) {
  const double below = x - lo, above = hi - x;
  if (below < above) return lo_bits;
  if (above < below) return lo_bits + 1;
  return (lo_bits & 1u) ? lo_bits + 1 : lo_bits;
}

uint16_t reference_f32_to_f16(float x) {
  const uint32_t u = bits_of(x);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  if (std::isnan(x)) return sign | 0x7e00u | static_cast<uint16_t>((u >> 13) & 0x1ffu);
  const double a = std::fabs(static_cast<double>(x));
  if (a >= 65520.0) return sign | 0x7c00u;  // halfway to 2^16 and beyond: ties to even = inf
  // The largest finite f16 at or below a (0x7bff = 65504 is the largest).
  uint32_t lo = 0;
  for (uint32_t step = 0x4000; step; step >>= 1)
    if (lo + step <= 0x7bffu && f16_value(static_cast<uint16_t>(lo + step)) <= a) lo += step;
  if (f16_value(static_cast<uint16_t>(lo)) == a) return sign | static_cast<uint16_t>(lo);
  const double hi_value = lo == 0x7bffu ? 65536.0 : f16_value(static_cast<uint16_t>(lo + 1));
  return sign |
         static_cast<uint16_t>(nearest(a, f16_value(static_cast<uint16_t>(lo)), hi_value, lo));
}

uint16_t reference_f32_to_bf16(float x) {
  const uint32_t u = bits_of(x);
  if (std::isnan(x)) return static_cast<uint16_t>((u >> 16) | 0x40u);
  const uint32_t sign = u & 0x80000000u, magnitude = u & 0x7fffffffu;
  const uint32_t lo = magnitude >> 16;  // bf16 bits at or below |x| (truncation)
  const double a = std::fabs(static_cast<double>(x));
  const double lo_value = static_cast<double>(float_of(lo << 16));
  if (lo_value == a) return static_cast<uint16_t>((sign >> 16) | lo);
  const double hi_value =
      lo + 1 == 0x7f80u ? std::ldexp(1.0, 128) : static_cast<double>(float_of((lo + 1) << 16));
  return static_cast<uint16_t>((sign >> 16) | nearest(a, lo_value, hi_value, lo));
}

// f32 inputs: random patterns; for every f16 (and a sample of bf16) neighbours, the midpoint and
// the floats either side of it; the overflow and underflow edges; zeros, infs, NaNs of both kinds.
std::vector<float> inputs() {
  std::vector<float> v;
  uint64_t state = 20261201;
  for (int i = 0; i < 1000000; ++i)
    v.push_back(float_of(static_cast<uint32_t>(splitmix64(&state))));
  for (uint32_t h = 0; h < 0x7c00; ++h) {
    const float lo = float_of(bits_of(reference_f16_to_f32(static_cast<uint16_t>(h))));
    const double hi = h == 0x7bff ? 65536.0 : f16_value(static_cast<uint16_t>(h + 1));
    const float mid = static_cast<float>((static_cast<double>(lo) + hi) / 2);  // exact in f32
    for (float f : {lo, mid, std::nextafter(mid, 0.0f), std::nextafter(mid, 1e30f)}) {
      v.push_back(f);
      v.push_back(-f);
    }
  }
  for (uint32_t e = 1; e < 255; ++e) {  // bf16 ties with even and odd kept mantissas
    for (uint32_t m : {0x8000u, 0x18000u, 0x7f8000u, 0x7fffffu, 0x7fff7fu, 0x0u, 0x1u}) {
      v.push_back(float_of((e << 23) | m));
      v.push_back(float_of(0x80000000u | (e << 23) | m));
    }
  }
  const float inf = std::numeric_limits<float>::infinity();
  for (float f : {0.0f, -0.0f, inf, -inf, 65504.0f, 65519.996f, 65520.0f, 65536.0f, 3.4e38f,
                  std::numeric_limits<float>::max(), std::numeric_limits<float>::denorm_min(),
                  std::numeric_limits<float>::min(), 2.9802322e-8f, 2.9802326e-8f, 5.9604645e-8f,
                  6.1035156e-5f, 6.1035149e-5f})
    v.push_back(f);
  for (uint32_t nan : {0x7fc00000u, 0xffc00000u, 0x7f800001u, 0xff800001u, 0x7fa00000u, 0x7fbfffffu,
                       0xffffffffu, 0x7f802000u, 0x7fc0deadu})
    v.push_back(float_of(nan));
  return v;
}

TEST(Half, F16ToF32EveryPatternMatchesTheReference) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const uint16_t x = static_cast<uint16_t>(h);
    ASSERT_EQ(bits_of(f16_bits_to_f32(x)), bits_of(reference_f16_to_f32(x))) << std::hex << h;
    ASSERT_EQ(bits_of(f16_to_f32(x)), bits_of(reference_f16_to_f32(x))) << "core " << h;
  }
  // A signalling NaN comes back quiet with its sign and payload; subnormals are exact.
  EXPECT_EQ(bits_of(f16_bits_to_f32(0xfc01)), 0xffc02000u);
  EXPECT_EQ(f16_bits_to_f32(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(f16_bits_to_f32(0x83ff), -std::ldexp(1023.0f, -24));
  EXPECT_EQ(f16_bits_to_f32(0x7c00), std::numeric_limits<float>::infinity());
}

TEST(Half, F32ToF16MatchesTheReference) {
  for (float x : inputs()) {
    const uint16_t want = reference_f32_to_f16(x);
    ASSERT_EQ(f32_to_f16_bits(x), want) << std::hex << bits_of(x);
    ASSERT_EQ(f32_to_f16(x), want) << "core " << std::hex << bits_of(x);
  }
  EXPECT_EQ(f32_to_f16_bits(65519.996f), 0x7bff);     // just below the halfway point to 2^16
  EXPECT_EQ(f32_to_f16_bits(65520.0f), 0x7c00);       // the tie goes to the even neighbour: inf
  EXPECT_EQ(f32_to_f16_bits(2.9802322e-8f), 0x0000);  // 2^-25, halfway to the least subnormal
  EXPECT_EQ(f32_to_f16_bits(2.9802326e-8f), 0x0001);  // just above it
  EXPECT_EQ(f32_to_f16_bits(-0.0f), 0x8000);
}

TEST(Half, NaNStaysAQuietNaNWithItsSign) {
  for (uint32_t nan : {0x7f800001u, 0xff800001u, 0x7fc00000u, 0xffc00000u, 0x7fbfffffu}) {
    const uint16_t h = f32_to_f16_bits(float_of(nan));
    EXPECT_EQ(h & 0x7e00u, 0x7e00u) << std::hex << nan;  // NaN exponent and quiet bit
    EXPECT_EQ(h >> 15, nan >> 31) << std::hex << nan;
    const uint16_t b = f32_to_bf16_bits(float_of(nan));
    EXPECT_EQ(b & 0x7fc0u, 0x7fc0u) << std::hex << nan;
    EXPECT_EQ(b >> 15, nan >> 31) << std::hex << nan;
    const float back = f16_bits_to_f32(h);
    EXPECT_TRUE(std::isnan(back));
    EXPECT_EQ(bits_of(back) & 0x400000u, 0x400000u);
  }
}

TEST(Half, Bf16MatchesTheReferenceBothWays) {
  for (float x : inputs()) {
    const uint16_t want = reference_f32_to_bf16(x);
    ASSERT_EQ(f32_to_bf16_bits(x), want) << std::hex << bits_of(x);
    ASSERT_EQ(f32_to_bf16(x), want) << "core " << std::hex << bits_of(x);
  }
  for (uint32_t h = 0; h < 65536; ++h) {  // widening is exact: the pattern shifted
    ASSERT_EQ(bits_of(bf16_bits_to_f32(static_cast<uint16_t>(h))), h << 16);
    ASSERT_EQ(bits_of(bf16_to_f32(static_cast<uint16_t>(h))), h << 16);
  }
}

}  // namespace
}  // namespace stoa::kernels
