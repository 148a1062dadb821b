// Ed25519 signatures (OpenSSL's): a pipeline stage signs its commitments with a key of its own
// (core/stage_commitment.h), and anyone holding the public key — the head before it submits, the
// hub at intake — checks the signature. Unlike a MAC under a key shared with the hub, the head
// can tell a stage's bad signature from a good one, so a bad one in a submitted rollout is the
// head's doing alone.
#pragma once
#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace stoa {

using PublicKey = std::array<uint8_t, 32>;
using Signature = std::array<uint8_t, 64>;

// A private key (its 32-byte seed) and its public key; generated from the system's randomness.
class SigningKey {
 public:
  static SigningKey generate();
  const PublicKey& public_key() const { return public_key_; }
  Signature sign(std::span<const uint8_t> message) const;

 private:
  std::array<uint8_t, 32> seed_{};
  PublicKey public_key_{};
};

bool signature_valid(const PublicKey& key, std::span<const uint8_t> message,
                     const Signature& signature);

// Lowercase hex of any byte string, and its parse (false unless exactly 2 * out.size() hex
// digits).
std::string bytes_hex(std::span<const uint8_t> bytes);
bool parse_hex(std::string_view hex, std::span<uint8_t> out);

}  // namespace stoa
