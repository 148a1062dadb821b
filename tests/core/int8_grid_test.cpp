#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "core/int8_grid.h"

namespace stoa {
namespace {

// Scalar restatement of GGUF Q8_0's block layout, written independently of int8_grid.cpp.
TEST(Int8Grid, MatchesTheQ8ZeroDefinition) {
  std::mt19937 rng(1);
  std::normal_distribution<float> normal(0.0f, 0.02f);
  std::vector<float> w(64 * 96);
  for (auto& x : w) x = normal(rng);
  Int8Matrix m = int8_quantize(w.data(), 64, 96);
  ASSERT_EQ(m.values.size(), w.size());
  ASSERT_EQ(m.scales.size(), 64u * 3);
  for (int64_t r = 0; r < 64; ++r) {
    for (int64_t g = 0; g < 3; ++g) {
      float amax = 0;
      for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(w[r * 96 + g * 32 + i]));
      float d = f16_to_f32(f32_to_f16(amax / 127.0f));
      EXPECT_EQ(m.scale(r, g), d);
      for (int i = 0; i < 32; ++i) {
        float x = w[r * 96 + g * 32 + i];
        int expected = static_cast<int>(std::round(x / d));
        expected = std::max(-127, std::min(127, expected));
        EXPECT_EQ(m.values[r * 96 + g * 32 + i], expected);
      }
    }
  }
  std::vector<float> back(w.size());
  int8_dequantize(m, back.data());
  for (size_t i = 0; i < w.size(); ++i) {
    float d = m.scale(static_cast<int64_t>(i) / 96, (static_cast<int64_t>(i) % 96) / 32);
    EXPECT_LE(std::fabs(back[i] - w[i]), d * 0.5f + 1e-9f);
  }
}

TEST(Int8Grid, FrozenScalesCountClipping) {
  std::vector<float> w(32, 0.01f);
  w[5] = 1.0f;
  uint16_t small_scale = f32_to_f16(0.01f / 127.0f);
  std::vector<uint16_t> scales = {small_scale};
  std::vector<int32_t> clipped;
  Int8Matrix m = int8_quantize_with_scales(w.data(), 1, 32, scales, &clipped);
  EXPECT_EQ(clipped[0], 1);
  EXPECT_EQ(m.values[5], 127);
}

TEST(Int8Grid, ZeroGroupAndBadShapes) {
  std::vector<float> zeros(32, 0.0f);
  Int8Matrix m = int8_quantize(zeros.data(), 1, 32);
  EXPECT_EQ(m.scales[0], 0);
  for (int8_t q : m.values) EXPECT_EQ(q, 0);
  EXPECT_THROW(int8_quantize(zeros.data(), 1, 31), Error);
  EXPECT_FALSE(int8_grid_fits({3, 33}));
  EXPECT_TRUE(int8_grid_fits({3, 64}));
}

}  // namespace
}  // namespace stoa
