// xxh3-128 content hashes: blob names in the content-addressed store, tensor and whole-state
// fingerprints that PULSE verifies after every patch.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

#include "core/tensor.h"

namespace stoa {

struct Hash128 {
  uint64_t high = 0;
  uint64_t low = 0;
  std::string hex() const;  // 32 lowercase hex digits, high word first (xxhsum's canonical order)
  static bool parse(std::string_view hex, Hash128* out);
  bool operator==(const Hash128&) const = default;
};

Hash128 hash_bytes(const void* data, size_t size);
Hash128 hash_tensor(const TensorView& view);  // dtype, shape and bytes

// Hash of a whole model state: feed tensors in name order; each contributes its name, dtype,
// shape and bytes, so a renamed or reshaped tensor changes the hash.
class StateHasher {
 public:
  StateHasher();
  ~StateHasher();
  StateHasher(const StateHasher&) = delete;
  StateHasher& operator=(const StateHasher&) = delete;
  void add(std::string_view name, const TensorView& view);
  void add_bytes(const void* data, size_t size);
  Hash128 finish() const;

 private:
  void* state_;  // XXH3_state_t*, kept opaque so users need not include xxhash.h
};

}  // namespace stoa
