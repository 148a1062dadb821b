// Internal: the last step of every W8A8 product (engine arithmetic v2, docs/design/arithmetic.md,
// "NaN"). A NaN output arises only from a NaN activation block or a non-finite weight scale, and
// its bits then depend on the target: x86 makes a fresh NaN (0 * inf) with the sign set, ARM
// without it, and each keeps an operand's payload. One canonical NaN makes every target agree.
#pragma once
#include <bit>
#include <cstdint>

namespace stoa::kernels {

inline void canonicalize_nan_outputs(float* y, int64_t y_stride, int64_t batch, int64_t row_begin,
                                     int64_t row_end) {
  const float canonical = std::bit_cast<float>(0x7fc00000u);
  for (int64_t b = 0; b < batch; ++b) {
    float* row = y + b * y_stride;
    // A select on every element (no branch, no memcpy): the compiler vectorises it.
    for (int64_t o = row_begin; o < row_end; ++o) {
      const uint32_t u = std::bit_cast<uint32_t>(row[o]);
      row[o] = (u & 0x7fffffffu) > 0x7f800000u ? canonical : row[o];
    }
  }
}

}  // namespace stoa::kernels
