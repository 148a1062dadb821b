// SHA-256 (OpenSSL's): the digests a pipeline's stages commit to (core/stage_commitment.h).
#pragma once
#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace stoa {

using Digest = std::array<uint8_t, 32>;
std::string digest_hex(const Digest& d);
// False unless `hex` is 64 hex digits.
bool parse_digest(std::string_view hex, Digest* out);

// An incremental SHA-256: copyable, so a forked sequence carries its parent's state.
class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256& other);
  Sha256& operator=(const Sha256& other);
  void update(const void* data, size_t size);
  Digest digest() const;  // of everything so far; the state goes on

 private:
  void* ctx_;  // EVP_MD_CTX*
};

// In constant time (a MAC compared byte by byte leaks how much of it matched).
bool digests_equal(const Digest& a, const Digest& b);

}  // namespace stoa
