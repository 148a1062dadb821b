// SHA-256 (OpenSSL's): the digests a pipeline's stages commit to (core/stage_commitment.h).
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>

namespace stoa {

using Digest = std::array<uint8_t, 32>;  // in hex: core/signing.h's bytes_hex, parse_hex

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

}  // namespace stoa
