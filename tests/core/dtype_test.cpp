#include <gtest/gtest.h>
#include <immintrin.h>

#include <cmath>
#include <random>

#include "core/dtype.h"

namespace stoa {
namespace {

bool same_bits_or_both_nan_f16(uint16_t a, uint16_t b) {
  bool a_nan = (a & 0x7c00) == 0x7c00 && (a & 0x3ff);
  bool b_nan = (b & 0x7c00) == 0x7c00 && (b & 0x3ff);
  return a_nan ? b_nan : a == b;
}

TEST(DType, F16ToF32IsExactForAllValuesAgainstF16C) {
  for (uint32_t h = 0; h < 65536; ++h) {
    float ours = f16_to_f32(static_cast<uint16_t>(h));
    float hw = _cvtsh_ss(static_cast<unsigned short>(h));
    if (std::isnan(hw)) {
      EXPECT_TRUE(std::isnan(ours)) << h;
    } else {
      EXPECT_EQ(f32_bits(ours), f32_bits(hw)) << "h=" << h;
    }
  }
}

TEST(DType, F16RoundTripsEveryValue) {
  for (uint32_t h = 0; h < 65536; ++h) {
    uint16_t back = f32_to_f16(f16_to_f32(static_cast<uint16_t>(h)));
    EXPECT_TRUE(same_bits_or_both_nan_f16(back, static_cast<uint16_t>(h))) << h;
  }
}

TEST(DType, F32ToF16MatchesF16COnRandomAndEdgeValues) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<uint32_t> bits;
  auto check = [](float x) {
    uint16_t hw = static_cast<uint16_t>(_cvtss_sh(x, _MM_FROUND_TO_NEAREST_INT));
    ASSERT_TRUE(same_bits_or_both_nan_f16(f32_to_f16(x), hw))
        << "x=" << x << " bits=" << f32_bits(x);
  };
  for (int i = 0; i < 2000000; ++i) check(f32_from_bits(bits(rng)));
  // Ties and boundaries: halfway points between f16 neighbours, overflow, subnormal edges.
  for (uint32_t h = 0; h < 0x7c00; ++h) {
    float lo = f16_to_f32(static_cast<uint16_t>(h));
    float hi = f16_to_f32(static_cast<uint16_t>(h + 1));
    check(lo + (hi - lo) / 2);
    check(-(lo + (hi - lo) / 2));
    check(std::nextafter(lo + (hi - lo) / 2, 0.0f));
    check(std::nextafter(lo + (hi - lo) / 2, 1e9f));
  }
  for (float x : {65504.0f, 65519.99f, 65520.0f, 1e-8f, 2.98e-8f, 2.9802322e-8f, 5.96e-8f, 0.0f,
                  -0.0f, INFINITY, -INFINITY, NAN}) {
    check(x);
  }
}

TEST(DType, Bf16RoundsToNearestEven) {
  EXPECT_EQ(f32_to_bf16(1.0f), 0x3f80);
  // 1 + 2^-8 is exactly halfway between bf16 1.0 and 1.0078125: ties to even (1.0).
  EXPECT_EQ(f32_to_bf16(1.00390625f), 0x3f80);
  // 1.0078125 + 2^-8 is halfway to 1.015625; the even neighbour is 1.015625 (0x3f82).
  EXPECT_EQ(f32_to_bf16(1.01171875f), 0x3f82);
  EXPECT_EQ(f32_to_bf16(INFINITY), 0x7f80);
  EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(NAN))));
  EXPECT_EQ(f32_to_bf16(3.4e38f), 0x7f80);  // rounds past the max finite bf16 to inf
  for (uint32_t h = 0; h < 65536; ++h) {
    float x = bf16_to_f32(static_cast<uint16_t>(h));
    if (!std::isnan(x)) {
      EXPECT_EQ(f32_to_bf16(x), h);
    }
  }
}

TEST(DType, ParsesNames) {
  DType d;
  ASSERT_TRUE(parse_dtype("BF16", &d));
  EXPECT_EQ(d, DType::kBF16);
  ASSERT_TRUE(parse_dtype("i8", &d));
  EXPECT_EQ(d, DType::kI8);
  EXPECT_FALSE(parse_dtype("F64", &d));
  EXPECT_EQ(dtype_size(DType::kI64), 8u);
}

}  // namespace
}  // namespace stoa
