// Little-endian byte writer and a bounds-checked reader for the binary formats (PULSE, the
// pipeline's stage frames). The reader never reads past its span: every short read throws
// kBadFormat naming `what` (the blob or frame) and the field.
#pragma once
#include <bit>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"

namespace stoa {

static_assert(std::endian::native == std::endian::little,
              "the binary codecs copy little-endian arrays directly");

class ByteWriter {
 public:
  explicit ByteWriter(std::vector<uint8_t>* out) : out_(*out) {}
  void u8(uint8_t v) { out_.push_back(v); }
  void u16(uint16_t v) { le(v, 2); }
  void u32(uint32_t v) { le(v, 4); }
  void u64(uint64_t v) { le(v, 8); }
  void varint(uint64_t v) {
    while (v >= 0x80) {
      out_.push_back(static_cast<uint8_t>(v | 0x80));
      v >>= 7;
    }
    out_.push_back(static_cast<uint8_t>(v));
  }
  void bytes(const void* data, size_t n) {
    const auto* p = static_cast<const uint8_t*>(data);
    out_.insert(out_.end(), p, p + n);
  }
  // Arrays of u16 (f16 scales, bf16 values) in one copy; the format is little-endian and so is
  // every host we build for (checked below).
  void u16_array(const uint16_t* values, size_t n) { bytes(values, n * 2); }
  void u32_array(const uint32_t* values, size_t n) { bytes(values, n * 4); }  // f32 bits
  size_t size() const { return out_.size(); }
  std::vector<uint8_t>& buffer() { return out_; }

 private:
  void le(uint64_t v, int n) {
    for (int i = 0; i < n; ++i) out_.push_back(static_cast<uint8_t>(v >> (8 * i)));
  }
  std::vector<uint8_t>& out_;
};

class ByteReader {
 public:
  ByteReader(std::span<const uint8_t> data, std::string what)
      : data_(data), what_(std::move(what)) {}
  uint8_t u8(const char* field) { return static_cast<uint8_t>(le(1, field)); }
  uint16_t u16(const char* field) { return static_cast<uint16_t>(le(2, field)); }
  uint32_t u32(const char* field) { return static_cast<uint32_t>(le(4, field)); }
  uint64_t u64(const char* field) { return le(8, field); }
  uint64_t varint(const char* field);
  // A view of the next n bytes (n is checked against what is left before any arithmetic).
  std::span<const uint8_t> take(uint64_t n, const char* field);
  std::string_view string(uint64_t n, const char* field);
  void u16_array(uint16_t* out, uint64_t n, const char* field) {
    need(n, 2, field);
    auto s = take(n * 2, field);
    if (!s.empty()) std::memcpy(out, s.data(), s.size());  // out may be null when n == 0
  }
  void u32_array(uint32_t* out, uint64_t n, const char* field) {
    need(n, 4, field);
    auto s = take(n * 4, field);
    if (!s.empty()) std::memcpy(out, s.data(), s.size());
  }
  // Throws unless count * elem_size bytes are left (overflow-safe).
  void need(uint64_t count, uint64_t elem_size, const char* field) const;

  size_t offset() const { return pos_; }
  size_t remaining() const { return data_.size() - pos_; }
  bool done() const { return pos_ == data_.size(); }
  const std::string& what() const { return what_; }
  [[noreturn]] void bad(const std::string& message) const;

 private:
  uint64_t le(int n, const char* field);
  std::span<const uint8_t> data_;
  size_t pos_ = 0;
  std::string what_;
};

}  // namespace stoa
