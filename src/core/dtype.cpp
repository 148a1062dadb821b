#include "core/dtype.h"

namespace stoa {

size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return 4;
    case DType::kBF16:
      return 2;
    case DType::kF16:
      return 2;
    case DType::kI8:
      return 1;
    case DType::kU8:
      return 1;
    case DType::kI32:
      return 4;
    case DType::kI64:
      return 8;
  }
  return 0;
}

const char* dtype_name(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return "f32";
    case DType::kBF16:
      return "bf16";
    case DType::kF16:
      return "f16";
    case DType::kI8:
      return "i8";
    case DType::kU8:
      return "u8";
    case DType::kI32:
      return "i32";
    case DType::kI64:
      return "i64";
  }
  return "?";
}

const char* safetensors_dtype_name(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return "F32";
    case DType::kBF16:
      return "BF16";
    case DType::kF16:
      return "F16";
    case DType::kI8:
      return "I8";
    case DType::kU8:
      return "U8";
    case DType::kI32:
      return "I32";
    case DType::kI64:
      return "I64";
  }
  return "?";
}

bool parse_dtype(std::string_view name, DType* out) {
  static constexpr struct {
    std::string_view ours, safetensors;
    DType dtype;
  } kTable[] = {
      {"f32", "F32", DType::kF32}, {"bf16", "BF16", DType::kBF16}, {"f16", "F16", DType::kF16},
      {"i8", "I8", DType::kI8},    {"u8", "U8", DType::kU8},       {"i32", "I32", DType::kI32},
      {"i64", "I64", DType::kI64},
  };
  for (const auto& row : kTable) {
    if (name == row.ours || name == row.safetensors) {
      *out = row.dtype;
      return true;
    }
  }
  return false;
}

float f16_to_f32(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exponent = (h >> 10) & 0x1fu;
  uint32_t mantissa = h & 0x3ffu;
  if (exponent == 0x1f) return f32_from_bits(sign | 0x7f800000u | (mantissa << 13));  // inf/NaN
  if (exponent == 0) {
    if (mantissa == 0) return f32_from_bits(sign);
    // Subnormal: value = mantissa * 2^-24, exact in f32.
    float magnitude = static_cast<float>(mantissa) * 5.9604644775390625e-8f;
    return sign ? -magnitude : magnitude;
  }
  return f32_from_bits(sign | ((exponent + 112) << 23) | (mantissa << 13));
}

uint16_t f32_to_f16(float value) {
  uint32_t bits = f32_bits(value);
  uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  uint32_t magnitude = bits & 0x7fffffffu;
  if (magnitude > 0x7f800000u)
    return sign | 0x7e00u | static_cast<uint16_t>((magnitude >> 13) & 0x1ffu);
  if (magnitude >= 0x477ff000u) return sign | 0x7c00u;  // rounds to >= 65520: inf
  if (magnitude < 0x38800000u) {
    // Result is subnormal (or zero): round magnitude * 2^24 to an integer, ties to even.
    // Shift the 24-bit significand right; exponents below 2^-25 round to zero (or the min).
    uint32_t exponent = magnitude >> 23;
    if (exponent < 102) return sign;  // < 2^-25: rounds to 0
    uint32_t significand = (magnitude & 0x7fffffu) | 0x800000u;
    uint32_t shift = 126 - exponent;  // in [14, 24]
    uint32_t result = significand >> shift;
    uint32_t remainder = significand & ((1u << shift) - 1);
    uint32_t half = 1u << (shift - 1);
    if (remainder > half || (remainder == half && (result & 1u))) ++result;
    return sign | static_cast<uint16_t>(result);
  }
  // Normal: rebias the exponent (127 -> 15) and round the 23-bit mantissa to 10 bits.
  uint32_t rebased = magnitude - (112u << 23);
  uint32_t result = rebased >> 13;
  uint32_t remainder = rebased & 0x1fffu;
  if (remainder > 0x1000u || (remainder == 0x1000u && (result & 1u))) ++result;
  return sign | static_cast<uint16_t>(result);
}

void convert_f32_to_bf16(const float* in, uint16_t* out, size_t n) {
  for (size_t i = 0; i < n; ++i) out[i] = f32_to_bf16(in[i]);
}
void convert_bf16_to_f32(const uint16_t* in, float* out, size_t n) {
  for (size_t i = 0; i < n; ++i) out[i] = bf16_to_f32(in[i]);
}
void convert_f32_to_f16(const float* in, uint16_t* out, size_t n) {
  for (size_t i = 0; i < n; ++i) out[i] = f32_to_f16(in[i]);
}
void convert_f16_to_f32(const uint16_t* in, float* out, size_t n) {
  for (size_t i = 0; i < n; ++i) out[i] = f16_to_f32(in[i]);
}

}  // namespace stoa
