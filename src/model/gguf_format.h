// GGUF v3 on-disk vocabulary shared by the writer and the reader: value types, the ggml tensor
// types we export (F32, F16, Q8_0; BF16 is read only), and a metadata value.
//
// Layout (little endian):  "GGUF" u32 version=3, u64 n_tensors, u64 n_kv,
//   n_kv x { string key, u32 value_type, value },
//   n_tensors x { string name, u32 n_dims, u64 ne[n_dims], u32 ggml_type, u64 offset },
//   padding to `general.alignment` (default 32), tensor data (each tensor at an aligned offset).
// Strings are u64 length + bytes (no terminator); arrays are u32 element type + u64 count + items.
// ggml dimension order is reversed from ours: ne[0] is the innermost (contiguous) axis.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace stoa::gguf {

inline constexpr uint32_t kMagic = 0x46554747;  // "GGUF" read as a little-endian u32
inline constexpr uint32_t kVersion = 3;
inline constexpr uint64_t kDefaultAlignment = 32;

enum class ValueType : uint32_t {
  kU8 = 0,
  kI8 = 1,
  kU16 = 2,
  kI16 = 3,
  kU32 = 4,
  kI32 = 5,
  kF32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kU64 = 10,
  kI64 = 11,
  kF64 = 12,
};
const char* value_type_name(ValueType type);
bool is_valid_value_type(uint32_t type);
// Bytes of one scalar item (0 for string and array).
size_t value_type_size(ValueType type);

// The ggml tensor types Stoa writes or reads (the numbers are ggml's enum values).
enum class GgmlType : uint32_t { kF32 = 0, kF16 = 1, kQ8_0 = 8, kBF16 = 30 };
const char* ggml_type_name(GgmlType type);
bool is_supported_ggml_type(uint32_t type);

// Q8_0 block: f16 scale (bits) followed by 32 int8 values — exactly Stoa's int8 grid group.
inline constexpr int64_t kQ8BlockValues = 32;
inline constexpr int64_t kQ8BlockBytes = 2 + kQ8BlockValues;
// Widens `blocks` consecutive Q8_0 blocks at `src` to f32 (scale × value) into `dst`.
void dequantize_q8_0(const uint8_t* src, size_t blocks, float* dst);

// Bytes of one row of `ne0` elements; fails (kInvalidArgument) if ne0 does not fit the type's
// block size.
uint64_t row_bytes(GgmlType type, int64_t ne0);

// A metadata value. Scalars keep their declared type; integers live in `i` (u64 values above
// INT64_MAX are stored bit-cast), floats in `f`. Arrays hold items of one element type.
struct Value {
  ValueType type = ValueType::kU32;
  ValueType array_type = ValueType::kU32;  // arrays only
  int64_t i = 0;
  double f = 0.0;
  std::string str;
  std::vector<Value> items;  // arrays only

  static Value u32(uint32_t v);
  static Value i32(int32_t v);
  static Value u64(uint64_t v);
  static Value f32(float v);
  static Value boolean(bool v);
  static Value string(std::string v);
  static Value array_i32(const std::vector<int32_t>& v);
  static Value array_u32(const std::vector<uint32_t>& v);
  static Value array_f32(const std::vector<float>& v);
  static Value array_string(const std::vector<std::string>& v);

  bool is_integer() const;
  bool is_float() const { return type == ValueType::kF32 || type == ValueType::kF64; }
  std::string describe() const;  // short human form for error messages and `info`
};

}  // namespace stoa::gguf
