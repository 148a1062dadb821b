// Secrets on the wire (join, session, operator tokens; worker secrets; certificate
// fingerprints): compared in constant time (a byte-by-byte `!=` leaks the length of the matching
// prefix through its timing) and stored only as SHA-256 digests where the hub keeps them.
#pragma once
#include <string>
#include <string_view>

namespace stoa::net {

// True when a and b are equal; the time taken depends only on their lengths (CRYPTO_memcmp).
bool constant_time_equal(std::string_view a, std::string_view b);
// SHA-256 of the bytes, 64 lowercase hex digits.
std::string sha256_hex(std::string_view bytes);

}  // namespace stoa::net
