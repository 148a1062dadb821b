// Scalar f16 / bf16 <-> f32 conversions for the kernels layer (which sits below core and so
// cannot use core/dtype.h). Exact: round-to-nearest-even, NaN stays NaN, subnormals kept.
#pragma once
#include <cstdint>
#include <cstring>

namespace stoa::kernels {

inline uint32_t bits_of(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float float_of(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// After F. Giesen's half_to_float: re-bias the exponent, fix up Inf/NaN and subnormals.
inline float f16_bits_to_f32(uint16_t h) {
  constexpr uint32_t kShiftedExp = 0x7c00u << 13;
  uint32_t o = (static_cast<uint32_t>(h) & 0x7fffu) << 13;
  const uint32_t exp = kShiftedExp & o;
  o += (127u - 15u) << 23;
  if (exp == kShiftedExp) {
    o += (128u - 16u) << 23;  // Inf / NaN
  } else if (exp == 0) {
    o += 1u << 23;  // zero / subnormal: renormalise with an exact float subtraction
    o = bits_of(float_of(o) - float_of(113u << 23));
  }
  return float_of(o | ((static_cast<uint32_t>(h) & 0x8000u) << 16));
}

uint16_t f32_to_f16_bits(float f);

inline float bf16_bits_to_f32(uint16_t h) {
  return float_of(static_cast<uint32_t>(h) << 16);
}

inline uint16_t f32_to_bf16_bits(float f) {
  const uint32_t u = bits_of(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40);  // qNaN
  return static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

}  // namespace stoa::kernels
