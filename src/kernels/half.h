// The one scalar f16 / bf16 <-> f32 conversion in Stoa. It lives in kernels, the bottom layer,
// because the kernels' scalar tails need it; core/dtype.h's f16_to_f32 and friends are this.
// Header-only, so core uses it without linking the kernels library.
//
// IEEE 754 behaviour, bit for bit that of the hardware conversions (F16C vcvtps2ph/vcvtph2ps,
// AVX512-BF16), so a value converts the same in a SIMD body and in its scalar tail:
// - f32 -> f16 / bf16 rounds to nearest, ties to even; overflow gives inf; f16 subnormals exact.
// - NaN stays NaN: quiet, sign kept, the top payload bits kept.
// - f16 -> f32 is exact (subnormals become normal f32s); a signalling NaN comes back quiet.
// - bf16 -> f32 is the exact widening (a shift) on every path; the narrowing above never makes a
//   signalling bf16 NaN, so one only arrives from outside, and it stays as it came.
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

// After F. Giesen's half_to_float: re-bias the exponent, fix up inf/NaN and subnormals.
inline float f16_bits_to_f32(uint16_t h) {
  constexpr uint32_t kShiftedExp = 0x7c00u << 13;
  uint32_t o = (static_cast<uint32_t>(h) & 0x7fffu) << 13;
  const uint32_t exp = kShiftedExp & o;
  o += (127u - 15u) << 23;
  if (exp == kShiftedExp) {
    o += (128u - 16u) << 23;            // inf / NaN
    if (o & 0x7fffffu) o |= 0x400000u;  // NaN: quiet
  } else if (exp == 0) {
    o += 1u << 23;  // zero / subnormal: renormalise with an exact float subtraction
    o = bits_of(float_of(o) - float_of(113u << 23));
  }
  return float_of(o | ((static_cast<uint32_t>(h) & 0x8000u) << 16));
}

// After F. Giesen's float_to_half_fast3_rtne: subnormal results come from an exact float add
// that lets the FPU round (to nearest even); normal results round the dropped 13 mantissa bits to
// nearest even by integer addition.
inline uint16_t f32_to_f16_bits(float f) {
  constexpr uint32_t kInf = 255u << 23;
  constexpr uint32_t kF16Max = (127u + 16u) << 23;  // 65536: at or above, the result is inf
  constexpr uint32_t kDenormMagic = ((127u - 15u) + (23u - 10u) + 1u) << 23;
  uint32_t u = bits_of(f);
  const uint32_t sign = u & 0x80000000u;
  u ^= sign;
  uint32_t o;
  if (u >= kF16Max) {
    o = u > kInf ? 0x7e00u | ((u >> 13) & 0x1ffu) : 0x7c00u;  // quiet NaN with payload, or inf
  } else if (u < (113u << 23)) {
    o = bits_of(float_of(u) + float_of(kDenormMagic)) - kDenormMagic;
  } else {
    const uint32_t mant_odd = (u >> 13) & 1u;
    u += ((15u - 127u) << 23) + 0xfffu + mant_odd;
    o = u >> 13;
  }
  return static_cast<uint16_t>(o | (sign >> 16));
}

inline float bf16_bits_to_f32(uint16_t h) {
  return float_of(static_cast<uint32_t>(h) << 16);
}

inline uint16_t f32_to_bf16_bits(float f) {
  const uint32_t u = bits_of(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40);  // qNaN
  return static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

}  // namespace stoa::kernels
