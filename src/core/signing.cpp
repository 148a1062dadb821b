#include "core/signing.h"

#include <openssl/evp.h>
#include <openssl/rand.h>

#include <memory>

#include "core/error.h"

namespace stoa {
namespace {

struct PkeyFree {
  void operator()(EVP_PKEY* p) const { EVP_PKEY_free(p); }
};
struct MdCtxFree {
  void operator()(EVP_MD_CTX* p) const { EVP_MD_CTX_free(p); }
};
using Pkey = std::unique_ptr<EVP_PKEY, PkeyFree>;
using MdCtx = std::unique_ptr<EVP_MD_CTX, MdCtxFree>;

}  // namespace

SigningKey SigningKey::generate() {
  SigningKey k;
  STOA_CHECK(RAND_bytes(k.seed_.data(), static_cast<int>(k.seed_.size())) == 1,
             ErrorKind::kInternal, "OpenSSL RAND_bytes failed");
  Pkey pkey(
      EVP_PKEY_new_raw_private_key(EVP_PKEY_ED25519, nullptr, k.seed_.data(), k.seed_.size()));
  size_t n = k.public_key_.size();
  STOA_CHECK(pkey && EVP_PKEY_get_raw_public_key(pkey.get(), k.public_key_.data(), &n) == 1 &&
                 n == k.public_key_.size(),
             ErrorKind::kInternal, "Ed25519: OpenSSL could not make a key");
  return k;
}

Signature SigningKey::sign(std::span<const uint8_t> message) const {
  Pkey pkey(EVP_PKEY_new_raw_private_key(EVP_PKEY_ED25519, nullptr, seed_.data(), seed_.size()));
  MdCtx ctx(EVP_MD_CTX_new());
  Signature s{};
  size_t n = s.size();
  STOA_CHECK(pkey && ctx &&
                 EVP_DigestSignInit(ctx.get(), nullptr, nullptr, nullptr, pkey.get()) == 1 &&
                 EVP_DigestSign(ctx.get(), s.data(), &n, message.data(), message.size()) == 1 &&
                 n == s.size(),
             ErrorKind::kInternal, "Ed25519: OpenSSL could not sign");
  return s;
}

bool signature_valid(const PublicKey& key, std::span<const uint8_t> message,
                     const Signature& signature) {
  Pkey pkey(EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, nullptr, key.data(), key.size()));
  MdCtx ctx(EVP_MD_CTX_new());
  if (!pkey || !ctx || EVP_DigestVerifyInit(ctx.get(), nullptr, nullptr, nullptr, pkey.get()) != 1)
    return false;  // not a key (a malformed public key verifies nothing)
  return EVP_DigestVerify(ctx.get(), signature.data(), signature.size(), message.data(),
                          message.size()) == 1;
}

std::string bytes_hex(std::span<const uint8_t> bytes) {
  static const char* kHex = "0123456789abcdef";
  std::string out;
  out.reserve(2 * bytes.size());
  for (uint8_t c : bytes) {
    out += kHex[c >> 4];
    out += kHex[c & 15];
  }
  return out;
}

bool parse_hex(std::string_view hex, std::span<uint8_t> out) {
  if (hex.size() != 2 * out.size()) return false;
  auto nibble = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  for (size_t i = 0; i < out.size(); ++i) {
    const int hi = nibble(hex[2 * i]), lo = nibble(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) return false;
    out[i] = static_cast<uint8_t>(hi * 16 + lo);
  }
  return true;
}

}  // namespace stoa
