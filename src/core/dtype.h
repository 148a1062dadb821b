// Element types and exact conversions between f32 and the 16-bit float formats.
// Both conversions round to nearest, ties to even, and keep NaN a NaN (quiet), inf an inf,
// and subnormals exact — they match the hardware instructions (F16C vcvtps2ph, AVX512-BF16).
#pragma once
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace stoa {

enum class DType : uint8_t { kF32, kBF16, kF16, kI8, kU8, kI32, kI64 };

size_t dtype_size(DType dtype);
const char* dtype_name(DType dtype);  // "f32", "bf16", ...
// Parses our names and the safetensors names ("F32", "BF16", "F16", "I8", "U8", "I32", "I64").
bool parse_dtype(std::string_view name, DType* out);
const char* safetensors_dtype_name(DType dtype);

inline uint32_t f32_bits(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, 4);
  return bits;
}
inline float f32_from_bits(uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, 4);
  return value;
}

inline float bf16_to_f32(uint16_t h) {
  return f32_from_bits(static_cast<uint32_t>(h) << 16);
}

inline uint16_t f32_to_bf16(float value) {
  uint32_t bits = f32_bits(value);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40);  // NaN
  uint32_t rounding_bias = 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>((bits + rounding_bias) >> 16);
}

float f16_to_f32(uint16_t h);
uint16_t f32_to_f16(float value);

// Bulk conversions (scalar; the SIMD versions live in kernels/).
void convert_f32_to_bf16(const float* in, uint16_t* out, size_t n);
void convert_bf16_to_f32(const uint16_t* in, float* out, size_t n);
void convert_f32_to_f16(const float* in, uint16_t* out, size_t n);
void convert_f16_to_f32(const uint16_t* in, float* out, size_t n);

}  // namespace stoa
