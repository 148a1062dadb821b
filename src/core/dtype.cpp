#include "core/dtype.h"

#include "core/enum_names.h"

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

constexpr EnumName<DType> kDTypeNames[] = {
    {DType::kF32, "f32"}, {DType::kBF16, "bf16"}, {DType::kF16, "f16"}, {DType::kI8, "i8"},
    {DType::kU8, "u8"},   {DType::kI32, "i32"},   {DType::kI64, "i64"}};

const char* dtype_name(DType dtype) {
  return enum_name(kDTypeNames, dtype);
}

constexpr EnumName<DType> kSafetensorsDTypeNames[] = {
    {DType::kF32, "F32"}, {DType::kBF16, "BF16"}, {DType::kF16, "F16"}, {DType::kI8, "I8"},
    {DType::kU8, "U8"},   {DType::kI32, "I32"},   {DType::kI64, "I64"}};

const char* safetensors_dtype_name(DType dtype) {
  return enum_name(kSafetensorsDTypeNames, dtype);
}

bool parse_dtype(std::string_view name, DType* out) {
  auto dtype = enum_from_name(kDTypeNames, name);
  if (!dtype) dtype = enum_from_name(kSafetensorsDTypeNames, name);
  if (dtype) *out = *dtype;
  return dtype.has_value();
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
