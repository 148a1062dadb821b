#include "core/sha256.h"

#include <openssl/evp.h>

#include "core/error.h"

namespace stoa {
namespace {

EVP_MD_CTX* ctx_of(void* p) {
  return static_cast<EVP_MD_CTX*>(p);
}

}  // namespace

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

}  // namespace stoa
