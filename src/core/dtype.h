// Element types and the f32 <-> 16-bit float conversions. The conversions are kernels/half.h's
// (one implementation, in the lowest layer that needs it): round to nearest, ties to even; NaN a
// quiet NaN with its sign; inf an inf; subnormals exact — as the hardware instructions (F16C
// vcvtps2ph, AVX512-BF16) do.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

#include "kernels/half.h"

namespace stoa {

enum class DType : uint8_t { kF32, kBF16, kF16, kI8, kU8, kI32, kI64 };

size_t dtype_size(DType dtype);
const char* dtype_name(DType dtype);  // "f32", "bf16", ...
// Parses our names and the safetensors names ("F32", "BF16", "F16", "I8", "U8", "I32", "I64").
bool parse_dtype(std::string_view name, DType* out);
const char* safetensors_dtype_name(DType dtype);

inline uint32_t f32_bits(float value) {
  return kernels::bits_of(value);
}
inline float f32_from_bits(uint32_t bits) {
  return kernels::float_of(bits);
}
inline float bf16_to_f32(uint16_t h) {
  return kernels::bf16_bits_to_f32(h);
}
inline uint16_t f32_to_bf16(float value) {
  return kernels::f32_to_bf16_bits(value);
}
inline float f16_to_f32(uint16_t h) {
  return kernels::f16_bits_to_f32(h);
}
inline uint16_t f32_to_f16(float value) {
  return kernels::f32_to_f16_bits(value);
}

// Bulk conversions (scalar; the SIMD versions live in kernels/).
void convert_f32_to_bf16(const float* in, uint16_t* out, size_t n);
void convert_bf16_to_f32(const uint16_t* in, float* out, size_t n);
void convert_f32_to_f16(const float* in, uint16_t* out, size_t n);
void convert_f16_to_f32(const uint16_t* in, float* out, size_t n);

}  // namespace stoa
