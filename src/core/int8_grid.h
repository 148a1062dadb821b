// The int8 grid every worker computes on: symmetric per-group int8, group = 32 consecutive values
// along the input dimension (the last axis of a [out, in] weight), one scale per group stored as
// f16 bits. This is exactly GGUF Q8_0's block (f16 d + 32 int8), so a Q8_0 export is lossless.
//
//   scale = f16(amax / 127)              (chosen at an anchor; PULSE keeps it frozen afterwards)
//   q     = clamp(round(x / scale), -127, 127)   rounding half away from zero, as llama.cpp does
//   x'    = q * f16_to_f32(scale)
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "core/tensor.h"

namespace stoa {

inline constexpr int64_t kInt8GroupSize = 32;

// A quantized [rows, cols] matrix; cols must be a multiple of kInt8GroupSize.
struct Int8Matrix {
  int64_t rows = 0;
  int64_t cols = 0;
  std::vector<int8_t> values;    // rows * cols, row-major
  std::vector<uint16_t> scales;  // rows * cols / 32, f16 bits, row-major by group

  int64_t groups_per_row() const { return cols / kInt8GroupSize; }
  float scale(int64_t row, int64_t group) const {
    return f16_to_f32(scales[static_cast<size_t>(row * groups_per_row() + group)]);
  }
  const int8_t* row(int64_t r) const { return values.data() + r * cols; }
  size_t nbytes() const { return values.size() + scales.size() * 2; }
};

// The f16 scale a fresh anchor gives a group of 32 values.
uint16_t int8_group_scale(const float* group);
// Quantizes 32 values on a given scale (f16 bits); returns how many were clipped to +-127
// (a clipped value means the frozen scale is too small for this group).
int int8_quantize_group(const float* group, uint16_t scale_bits, int8_t* out);

// Quantizes a [rows, cols] f32 matrix, choosing fresh scales.
Int8Matrix int8_quantize(const float* data, int64_t rows, int64_t cols);
// Quantizes on the given (frozen) scales; `clipped`, if given, receives the clip count per group.
Int8Matrix int8_quantize_with_scales(const float* data, int64_t rows, int64_t cols,
                                     std::span<const uint16_t> scales,
                                     std::vector<int32_t>* clipped = nullptr);
// Dequantizes into out[rows * cols].
void int8_dequantize(const Int8Matrix& m, float* out);

bool int8_grid_fits(const Shape& shape);  // rank 2 and cols % 32 == 0

}  // namespace stoa
