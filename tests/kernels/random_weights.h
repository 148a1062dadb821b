// Random int8 test weights and f32 activations shared by the matmul tests: per-row magnitudes
// spread over five decades so that scales differ between groups and rows (and some rows quantise
// coarsely).
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "core/int8_grid.h"

namespace stoa::kernels::test {

inline Int8Matrix random_int8_weights(int64_t rows, int64_t cols, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> wf(static_cast<size_t>(rows * cols));
  for (int64_t r = 0; r < rows; ++r) {
    const float mag = std::pow(10.0f, static_cast<float>(r % 5) - 2.0f);
    for (int64_t i = 0; i < cols; ++i) wf[r * cols + i] = mag * normal(rng);
  }
  return int8_quantize(wf.data(), rows, cols);
}

// batch x cols standard-normal activations; where there is room, the first block of 32 is all
// zero (scale 0: the kernels must not divide by it).
inline std::vector<float> random_activations(int64_t batch, int64_t cols, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(batch * cols));
  for (auto& v : x) v = normal(rng);
  if (batch > 0 && cols >= 64) std::fill_n(x.begin(), 32, 0.0f);
  return x;
}

}  // namespace stoa::kernels::test
