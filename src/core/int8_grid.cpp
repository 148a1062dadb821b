#include "core/int8_grid.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace stoa {

uint16_t int8_group_scale(const float* group) {
  float amax = 0.0f;
  for (int64_t i = 0; i < kInt8GroupSize; ++i) amax = std::max(amax, std::fabs(group[i]));
  return f32_to_f16(amax / 127.0f);
}

int int8_quantize_group(const float* group, uint16_t scale_bits, int8_t* out) {
  float scale = f16_to_f32(scale_bits);
  int clipped = 0;
  for (int64_t i = 0; i < kInt8GroupSize; ++i) {
    if (scale == 0.0f || !std::isfinite(scale)) {
      out[i] = 0;
      clipped += group[i] != 0.0f;
      continue;
    }
    float q = std::round(group[i] / scale);  // half away from zero, like llama.cpp's roundf
    if (q > 127.0f) {
      q = 127.0f;
      ++clipped;
    } else if (q < -127.0f) {
      q = -127.0f;
      ++clipped;
    } else if (std::isnan(q)) {
      q = 0.0f;
      ++clipped;
    }
    out[i] = static_cast<int8_t>(q);
  }
  return clipped;
}

bool int8_grid_fits(const Shape& shape) {
  return shape.size() == 2 && shape[1] > 0 && shape[1] % kInt8GroupSize == 0;
}

static void check_grid_shape(int64_t rows, int64_t cols) {
  STOA_CHECK(rows >= 0 && cols > 0 && cols % kInt8GroupSize == 0, ErrorKind::kInvalidArgument,
             "int8 grid needs cols to be a positive multiple of ", kInt8GroupSize, ", got [", rows,
             ", ", cols, "]");
}

Int8Matrix int8_quantize(const float* data, int64_t rows, int64_t cols) {
  check_grid_shape(rows, cols);
  std::vector<uint16_t> scales(static_cast<size_t>(rows * (cols / kInt8GroupSize)));
  for (size_t g = 0; g < scales.size(); ++g)
    scales[g] = int8_group_scale(data + g * kInt8GroupSize);
  return int8_quantize_with_scales(data, rows, cols, scales);
}

Int8Matrix int8_quantize_with_scales(const float* data, int64_t rows, int64_t cols,
                                     std::span<const uint16_t> scales,
                                     std::vector<int32_t>* clipped) {
  check_grid_shape(rows, cols);
  Int8Matrix m;
  m.rows = rows;
  m.cols = cols;
  size_t groups = static_cast<size_t>(rows * (cols / kInt8GroupSize));
  STOA_CHECK(scales.size() == groups, ErrorKind::kInvalidArgument, "int8 grid: ", scales.size(),
             " scales for ", groups, " groups");
  m.scales.assign(scales.begin(), scales.end());
  m.values.resize(static_cast<size_t>(rows * cols));
  if (clipped) clipped->assign(groups, 0);
  for (size_t g = 0; g < groups; ++g) {
    int c = int8_quantize_group(data + g * kInt8GroupSize, m.scales[g],
                                m.values.data() + g * kInt8GroupSize);
    if (clipped) (*clipped)[g] = c;
  }
  return m;
}

void int8_dequantize(const Int8Matrix& m, float* out) {
  size_t groups = m.scales.size();
  for (size_t g = 0; g < groups; ++g) {
    float scale = f16_to_f32(m.scales[g]);
    for (int64_t i = 0; i < kInt8GroupSize; ++i) {
      size_t k = g * kInt8GroupSize + static_cast<size_t>(i);
      out[k] = static_cast<float>(m.values[k]) * scale;
    }
  }
}

}  // namespace stoa
