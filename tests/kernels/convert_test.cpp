// Bulk f16/bf16 <-> f32 conversions against core's exact scalar conversions, bit for bit, on
// every SIMD target: all 65536 half patterns, and f32 patterns covering every exponent,
// rounding ties, subnormals, Inf and NaN.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "core/dtype.h"
#include "kernels/half.h"
#include "kernels/target_loop.h"
#include "kernels/vec_ops.h"

namespace stoa::kernels {
namespace {

uint32_t bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

std::vector<float> tricky_floats() {
  std::vector<float> v;
  std::mt19937 rng(5);
  for (int i = 0; i < 200000; ++i) {
    uint32_t u = rng();
    float f;
    std::memcpy(&f, &u, 4);
    v.push_back(f);
  }
  // Exact halfway cases for f16 (13 dropped bits = 0x1000) and bf16 (16 dropped bits = 0x8000),
  // with even and odd kept mantissas, across the normal and subnormal f16 ranges.
  for (uint32_t e = 100; e < 145; ++e) {
    for (uint32_t m : {0x1000u, 0x3000u, 0x8000u, 0x18000u, 0x7fffffu, 0x0u, 0x400fffu}) {
      for (uint32_t s : {0u, 0x80000000u}) {
        const uint32_t u = s | (e << 23) | m;
        float f;
        std::memcpy(&f, &u, 4);
        v.push_back(f);
      }
    }
  }
  for (float f :
       {0.0f, -0.0f, 65504.0f, 65519.0f, 65520.0f, 1e-8f, 6e-8f, 3e38f,
        std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
        std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::denorm_min()})
    v.push_back(f);
  return v;
}

TEST(Convert, F16ToF32AllPatterns) {
  std::vector<uint16_t> all(65536);
  for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<uint16_t>(i);
  test::for_each_target([&] {
    std::vector<float> out(all.size());
    for (size_t n : {all.size(), size_t{13}}) {  // 13: the scalar tail alone
      convert_f16_to_f32(all.data(), out.data(), n);
      for (size_t i = 0; i < n; ++i) {
        const float want = f16_to_f32(all[i]);
        if (std::isnan(want)) {  // hardware may quiet a signalling NaN: only NaN-ness is fixed
          ASSERT_TRUE(std::isnan(out[i])) << i;
          ASSERT_TRUE(std::isnan(f16_bits_to_f32(all[i]))) << i;
        } else {
          ASSERT_EQ(bits(out[i]), bits(want)) << std::hex << i;
          ASSERT_EQ(bits(f16_bits_to_f32(all[i])), bits(want)) << "scalar helper " << i;
        }
      }
    }
  });
}

TEST(Convert, F32ToF16RoundsToNearestEven) {
  const auto in = tricky_floats();
  test::for_each_target([&] {
    std::vector<uint16_t> out(in.size());
    convert_f32_to_f16(in.data(), out.data(), in.size());
    for (size_t i = 0; i < in.size(); ++i) {
      const uint16_t want = f32_to_f16(in[i]);
      if (std::isnan(in[i])) {
        ASSERT_TRUE((out[i] & 0x7c00) == 0x7c00 && (out[i] & 0x3ff) != 0) << i;
        continue;
      }
      ASSERT_EQ(out[i], want) << std::hex << bits(in[i]);
      ASSERT_EQ(f32_to_f16_bits(in[i]), want) << "scalar helper " << std::hex << bits(in[i]);
    }
  });
}

TEST(Convert, Bf16BothWays) {
  const auto in = tricky_floats();
  test::for_each_target([&] {
    std::vector<uint16_t> out(in.size());
    convert_f32_to_bf16(in.data(), out.data(), in.size());
    for (size_t i = 0; i < in.size(); ++i)
      ASSERT_EQ(out[i], f32_to_bf16(in[i])) << std::hex << bits(in[i]);
    std::vector<float> back(in.size());
    convert_bf16_to_f32(out.data(), back.data(), out.size());
    for (size_t i = 0; i < in.size(); ++i) ASSERT_EQ(bits(back[i]), bits(bf16_to_f32(out[i])));
  });
}

}  // namespace
}  // namespace stoa::kernels
