#include "model/gguf_format.h"

#include <cstring>

#include "core/dtype.h"
#include "core/enum_names.h"
#include "core/error.h"

namespace stoa::gguf {

constexpr EnumName<ValueType> kValueTypeNames[] = {
    {ValueType::kU8, "u8"},       {ValueType::kI8, "i8"},     {ValueType::kU16, "u16"},
    {ValueType::kI16, "i16"},     {ValueType::kU32, "u32"},   {ValueType::kI32, "i32"},
    {ValueType::kF32, "f32"},     {ValueType::kBool, "bool"}, {ValueType::kString, "string"},
    {ValueType::kArray, "array"}, {ValueType::kU64, "u64"},   {ValueType::kI64, "i64"},
    {ValueType::kF64, "f64"}};

const char* value_type_name(ValueType type) {
  return enum_name(kValueTypeNames, type);
}

bool is_valid_value_type(uint32_t type) {
  return type <= static_cast<uint32_t>(ValueType::kF64);
}

size_t value_type_size(ValueType type) {
  switch (type) {
    case ValueType::kU8:
    case ValueType::kI8:
    case ValueType::kBool:
      return 1;
    case ValueType::kU16:
    case ValueType::kI16:
      return 2;
    case ValueType::kU32:
    case ValueType::kI32:
    case ValueType::kF32:
      return 4;
    case ValueType::kU64:
    case ValueType::kI64:
    case ValueType::kF64:
      return 8;
    case ValueType::kString:
    case ValueType::kArray:
      return 0;
  }
  return 0;
}

constexpr EnumName<GgmlType> kGgmlTypeNames[] = {{GgmlType::kF32, "F32"},
                                                 {GgmlType::kF16, "F16"},
                                                 {GgmlType::kQ8_0, "Q8_0"},
                                                 {GgmlType::kBF16, "BF16"}};

const char* ggml_type_name(GgmlType type) {
  return enum_name(kGgmlTypeNames, type);
}

bool is_supported_ggml_type(uint32_t type) {
  return type == static_cast<uint32_t>(GgmlType::kF32) ||
         type == static_cast<uint32_t>(GgmlType::kF16) ||
         type == static_cast<uint32_t>(GgmlType::kQ8_0) ||
         type == static_cast<uint32_t>(GgmlType::kBF16);
}

uint64_t row_bytes(GgmlType type, int64_t ne0) {
  STOA_CHECK(ne0 > 0, ErrorKind::kInvalidArgument, "GGUF row length must be positive, got ", ne0);
  switch (type) {
    case GgmlType::kF32:
      return static_cast<uint64_t>(ne0) * 4;
    case GgmlType::kF16:
    case GgmlType::kBF16:
      return static_cast<uint64_t>(ne0) * 2;
    case GgmlType::kQ8_0:
      STOA_CHECK(ne0 % kQ8BlockValues == 0, ErrorKind::kInvalidArgument,
                 "Q8_0 rows need a multiple of 32 elements, got ", ne0);
      return static_cast<uint64_t>(ne0 / kQ8BlockValues) * kQ8BlockBytes;
  }
  fail(ErrorKind::kInternal, "unknown ggml type ", static_cast<uint32_t>(type));
}

// Every integer kind, booleans included, is held in `i`: only the type tag tells them apart.
static Value integer_value(ValueType type, int64_t i) {
  Value out;
  out.type = type;
  out.i = i;
  return out;
}
Value Value::u32(uint32_t v) {
  return integer_value(ValueType::kU32, v);
}
Value Value::i32(int32_t v) {
  return integer_value(ValueType::kI32, v);
}
Value Value::u64(uint64_t v) {
  return integer_value(ValueType::kU64, static_cast<int64_t>(v));
}
Value Value::f32(float v) {
  Value out;
  out.type = ValueType::kF32;
  out.f = v;
  return out;
}
Value Value::boolean(bool v) {
  return integer_value(ValueType::kBool, v ? 1 : 0);
}
Value Value::string(std::string v) {
  Value out;
  out.type = ValueType::kString;
  out.str = std::move(v);
  return out;
}

template <typename T, typename Make>
static Value make_array(ValueType element, const std::vector<T>& v, Make make) {
  Value out;
  out.type = ValueType::kArray;
  out.array_type = element;
  out.items.reserve(v.size());
  for (const T& x : v) out.items.push_back(make(x));
  return out;
}
Value Value::array_i32(const std::vector<int32_t>& v) {
  return make_array(ValueType::kI32, v, [](int32_t x) { return Value::i32(x); });
}
Value Value::array_u32(const std::vector<uint32_t>& v) {
  return make_array(ValueType::kU32, v, [](uint32_t x) { return Value::u32(x); });
}
Value Value::array_f32(const std::vector<float>& v) {
  return make_array(ValueType::kF32, v, [](float x) { return Value::f32(x); });
}
Value Value::array_string(const std::vector<std::string>& v) {
  return make_array(ValueType::kString, v, [](const std::string& x) { return Value::string(x); });
}

bool Value::is_integer() const {
  switch (type) {
    case ValueType::kU8:
    case ValueType::kI8:
    case ValueType::kU16:
    case ValueType::kI16:
    case ValueType::kU32:
    case ValueType::kI32:
    case ValueType::kU64:
    case ValueType::kI64:
      return true;
    default:
      return false;
  }
}

std::string Value::describe() const {
  if (type == ValueType::kString)
    return cat('"', str.size() > 60 ? str.substr(0, 60) + "..." : str, '"');
  if (type == ValueType::kBool) return i ? "true" : "false";
  if (type == ValueType::kU64) return std::to_string(static_cast<uint64_t>(i));
  if (is_integer()) return std::to_string(i);
  if (is_float()) return cat(f);
  std::string out = cat(value_type_name(array_type), "[", items.size(), "]");
  if (items.size() <= 8 && array_type != ValueType::kArray) {
    out += " {";
    for (size_t k = 0; k < items.size(); ++k) out += (k ? ", " : "") + items[k].describe();
    out += "}";
  }
  return out;
}

void dequantize_q8_0(const uint8_t* src, size_t blocks, float* dst) {
  for (size_t b = 0; b < blocks; ++b) {
    const uint8_t* block = src + b * kQ8BlockBytes;
    uint16_t scale_bits;
    std::memcpy(&scale_bits, block, 2);
    const float scale = f16_to_f32(scale_bits);
    float* out = dst + b * kQ8BlockValues;
    for (int64_t k = 0; k < kQ8BlockValues; ++k)
      out[k] = scale * static_cast<float>(static_cast<int8_t>(block[2 + k]));
  }
}

}  // namespace stoa::gguf
