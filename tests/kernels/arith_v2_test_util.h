// Helpers shared by the engine arithmetic v2 tests (tests/kernels/arith_v2*_test.cpp) and the
// Vulkan backend's exactness tests: the distance in ulps, and random Q8_0 problems quantised with
// v2::quantize_q8.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <random>
#include <vector>

#include "kernels/arith_v2.h"
#include "kernels/half.h"

namespace stoa::kernels {

// How many floats lie between a and b (0 when the bits are equal; +0 and -0 are 1 apart, NaNs
// far from everything), by the usual sign-magnitude to two's-complement mapping.
inline int64_t ulp_distance(float a, float b) {
  const auto ordered = [](float v) {
    const uint32_t u = bits_of(v);
    return (u & 0x80000000u) ? -static_cast<int64_t>(u & 0x7fffffffu) : static_cast<int64_t>(u);
  };
  return std::llabs(ordered(a) - ordered(b));
}

// A random rows x cols int8 weight matrix with f16 block scales (f16 subnormals among them) and
// `batch` activation rows quantised by v2::quantize_q8 (a zero block and a tiny-valued block
// among them), with the blocks' amax kept for the tests.
struct RandomQ8 {
  int64_t rows = 0, cols = 0, batch = 0;
  std::vector<int8_t> wq;
  std::vector<uint16_t> ws;
  std::vector<float> x, xd, block_amax;
  std::vector<int8_t> xq;
  std::vector<int32_t> xsums;

  Int8Weights weights() const { return {wq.data(), ws.data(), rows, cols}; }
  Q8Activations acts() const {
    auto& self = const_cast<RandomQ8&>(*this);
    return {self.xq.data(), self.xd.data(), batch, cols, self.xsums.data()};
  }
};

inline RandomQ8 random_q8(std::mt19937_64& rng, int64_t rows, int64_t cols, int64_t batch) {
  RandomQ8 m;
  m.rows = rows;
  m.cols = cols;
  m.batch = batch;
  const int64_t groups = cols / 32;
  std::uniform_int_distribution<int> q(-128, 127);
  std::uniform_int_distribution<int> exponent(-30, 2);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  m.wq.resize(rows * cols);
  for (auto& v : m.wq) v = static_cast<int8_t>(q(rng));
  m.ws.resize(rows * groups);
  for (auto& s : m.ws) {
    // Mostly the magnitudes a trained model has, some f16 subnormals, some negative scales.
    const float mag = std::ldexp(1.0f + 0.5f * std::fabs(normal(rng)), exponent(rng));
    s = f32_to_f16_bits((rng() % 8 == 0) ? -mag : mag);
  }
  m.x.resize(batch * cols);
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t g = 0; g < groups; ++g) {
      const int kind = static_cast<int>(rng() % 16);
      const float scale = kind == 0 ? 0.0f : std::ldexp(1.0f, kind == 1 ? -120 : exponent(rng));
      for (int64_t i = 0; i < 32; ++i) m.x[b * cols + g * 32 + i] = normal(rng) * scale;
    }
  m.xq.resize(batch * cols);
  m.xd.resize(batch * groups);
  m.xsums.resize(batch * groups);
  v2::quantize_q8(m.x.data(), cols, m.acts());
  m.block_amax.resize(batch * groups);
  for (int64_t k = 0; k < batch * groups; ++k) {
    float amax = 0;
    for (int i = 0; i < 32; ++i) amax = std::fmax(amax, std::fabs(v2::flush(m.x[k * 32 + i])));
    m.block_amax[k] = amax;
  }
  return m;
}

}  // namespace stoa::kernels
