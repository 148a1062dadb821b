#include "kernels/half.h"

namespace stoa::kernels {

// After F. Giesen's float_to_half_fast3_rtne: subnormal results come from an exact float add
// that lets the FPU round; normal results round the dropped 13 mantissa bits to nearest even.
uint16_t f32_to_f16_bits(float f) {
  constexpr uint32_t kInf = 255u << 23;
  constexpr uint32_t kF16Max = (127u + 16u) << 23;  // 65536: at or above, the result is Inf
  constexpr uint32_t kDenormMagic = ((127u - 15u) + (23u - 10u) + 1u) << 23;
  uint32_t u = bits_of(f);
  const uint32_t sign = u & 0x80000000u;
  u ^= sign;
  uint32_t o;
  if (u >= kF16Max) {
    o = u > kInf ? 0x7e00u : 0x7c00u;
  } else if (u < (113u << 23)) {
    o = bits_of(float_of(u) + float_of(kDenormMagic)) - kDenormMagic;
  } else {
    const uint32_t mant_odd = (u >> 13) & 1u;
    u += ((15u - 127u) << 23) + 0xfffu + mant_odd;
    o = u >> 13;
  }
  return static_cast<uint16_t>(o | (sign >> 16));
}

}  // namespace stoa::kernels
