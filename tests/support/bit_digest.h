// The exact bits of floats, and a digest of them, for the tests that pin a computation's results
// bit for bit (golden digests that must hold on every machine).
#pragma once
#include <bit>
#include <cstdint>

namespace stoa::test {

inline uint32_t bits(float f) {
  return std::bit_cast<uint32_t>(f);
}
inline uint64_t bits(double d) {
  return std::bit_cast<uint64_t>(d);
}

// FNV-1a, byte by byte from the low end of each word: the same digest on any endianness.
struct BitDigest {
  uint64_t h = 0xcbf29ce484222325ull;
  void add(uint64_t w, int bytes = 8) {
    for (int i = 0; i < bytes; ++i) {
      h ^= (w >> (8 * i)) & 0xff;
      h *= 0x100000001b3ull;
    }
  }
};

}  // namespace stoa::test
