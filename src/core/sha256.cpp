#include "core/sha256.h"

#include <openssl/evp.h>

#include "core/error.h"

namespace stoa {
namespace {

EVP_MD_CTX* ctx_of(void* p) {
  return static_cast<EVP_MD_CTX*>(p);
}

}  // namespace

std::string digest_hex(const Digest& d) {
  static const char* kHex = "0123456789abcdef";
  std::string out;
  out.reserve(64);
  for (uint8_t c : d) {
    out += kHex[c >> 4];
    out += kHex[c & 15];
  }
  return out;
}

bool parse_digest(std::string_view hex, Digest* out) {
  if (hex.size() != 64) return false;
  auto nibble = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  for (size_t i = 0; i < 32; ++i) {
    const int hi = nibble(hex[2 * i]), lo = nibble(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) return false;
    (*out)[i] = static_cast<uint8_t>(hi * 16 + lo);
  }
  return true;
}

Sha256::Sha256() : ctx_(EVP_MD_CTX_new()) {
  STOA_CHECK(ctx_ != nullptr && EVP_DigestInit_ex(ctx_of(ctx_), EVP_sha256(), nullptr) == 1,
             ErrorKind::kInternal, "SHA-256: OpenSSL could not start a digest");
}

Sha256::~Sha256() {
  EVP_MD_CTX_free(ctx_of(ctx_));
}

Sha256::Sha256(const Sha256& other) : ctx_(EVP_MD_CTX_new()) {
  STOA_CHECK(ctx_ != nullptr && EVP_MD_CTX_copy_ex(ctx_of(ctx_), ctx_of(other.ctx_)) == 1,
             ErrorKind::kInternal, "SHA-256: OpenSSL could not copy a digest");
}

Sha256& Sha256::operator=(const Sha256& other) {
  if (this != &other)
    STOA_CHECK(EVP_MD_CTX_copy_ex(ctx_of(ctx_), ctx_of(other.ctx_)) == 1, ErrorKind::kInternal,
               "SHA-256: OpenSSL could not copy a digest");
  return *this;
}

void Sha256::update(const void* data, size_t size) {
  if (size > 0) EVP_DigestUpdate(ctx_of(ctx_), data, size);
}

Digest Sha256::digest() const {
  Sha256 copy(*this);  // finishing ends a context: finish a copy
  Digest d{};
  unsigned int n = 0;
  STOA_CHECK(EVP_DigestFinal_ex(ctx_of(copy.ctx_), d.data(), &n) == 1 && n == d.size(),
             ErrorKind::kInternal, "SHA-256: OpenSSL could not finish a digest");
  return d;
}

bool digests_equal(const Digest& a, const Digest& b) {
  uint8_t diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<uint8_t>(a[i] ^ b[i]);
  return diff == 0;
}

}  // namespace stoa
