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
