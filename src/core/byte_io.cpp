#include "core/byte_io.h"

namespace stoa {

void ByteReader::bad(const std::string& message) const {
  fail(ErrorKind::kBadFormat, what_, ": ", message, " (at byte ", pos_, " of ", data_.size(), ")");
}

uint64_t ByteReader::le(int n, const char* field) {
  if (remaining() < static_cast<size_t>(n)) bad(cat("truncated in ", field));
  uint64_t v = 0;
  for (int i = 0; i < n; ++i) v |= static_cast<uint64_t>(data_[pos_ + i]) << (8 * i);
  pos_ += static_cast<size_t>(n);
  return v;
}

uint64_t ByteReader::varint(const char* field) {
  uint64_t v = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    if (pos_ >= data_.size()) bad(cat("truncated varint in ", field));
    uint8_t b = data_[pos_++];
    if (shift == 63 && (b & 0xfe)) bad(cat("varint overflows 64 bits in ", field));
    v |= static_cast<uint64_t>(b & 0x7f) << shift;
    if (!(b & 0x80)) return v;
  }
  bad(cat("varint longer than 10 bytes in ", field));
}

std::span<const uint8_t> ByteReader::take(uint64_t n, const char* field) {
  if (n > remaining()) bad(cat(field, " needs ", n, " bytes, ", remaining(), " left"));
  auto s = data_.subspan(pos_, static_cast<size_t>(n));
  pos_ += static_cast<size_t>(n);
  return s;
}

std::string_view ByteReader::string(uint64_t n, const char* field) {
  auto s = take(n, field);
  return std::string_view(reinterpret_cast<const char*>(s.data()), s.size());
}

void ByteReader::need(uint64_t count, uint64_t elem_size, const char* field) const {
  if (elem_size != 0 && count > remaining() / elem_size)
    bad(cat(field, " needs ", count, " x ", elem_size, " bytes, ", remaining(), " left"));
}

}  // namespace stoa
