#include "core/hash.h"

#define XXH_INLINE_ALL
#include <xxhash.h>

#include <cstdio>

#include "core/error.h"

namespace stoa {

static Hash128 from_xxh(XXH128_hash_t h) {
  return Hash128{h.high64, h.low64};
}

std::string Hash128::hex() const {
  char buffer[33];
  std::snprintf(buffer, sizeof(buffer), "%016llx%016llx", static_cast<unsigned long long>(high),
                static_cast<unsigned long long>(low));
  return std::string(buffer, 32);
}

bool Hash128::parse(std::string_view hex, Hash128* out) {
  if (hex.size() != 32) return false;
  uint64_t words[2] = {0, 0};
  for (size_t i = 0; i < 32; ++i) {
    char c = hex[i];
    int v;
    if (c >= '0' && c <= '9')
      v = c - '0';
    else if (c >= 'a' && c <= 'f')
      v = c - 'a' + 10;
    else
      return false;
    words[i / 16] = (words[i / 16] << 4) | static_cast<uint64_t>(v);
  }
  out->high = words[0];
  out->low = words[1];
  return true;
}

Hash128 hash_bytes(const void* data, size_t size) {
  return from_xxh(XXH3_128bits(data, size));
}

static void feed_tensor_header(XXH3_state_t* state, const TensorView& view) {
  uint8_t dtype = static_cast<uint8_t>(view.dtype);
  XXH3_128bits_update(state, &dtype, 1);
  uint64_t rank = view.shape.size();
  XXH3_128bits_update(state, &rank, sizeof(rank));
  for (int64_t d : view.shape) XXH3_128bits_update(state, &d, sizeof(d));
}

Hash128 hash_tensor(const TensorView& view) {
  STOA_CHECK(view.is_contiguous(), ErrorKind::kInvalidArgument,
             "hash_tensor needs a contiguous view");
  XXH3_state_t state;
  XXH3_128bits_reset(&state);
  feed_tensor_header(&state, view);
  XXH3_128bits_update(&state, view.data, view.nbytes());
  return from_xxh(XXH3_128bits_digest(&state));
}

StateHasher::StateHasher() : state_(XXH3_createState()) {
  XXH3_128bits_reset(static_cast<XXH3_state_t*>(state_));
}
StateHasher::~StateHasher() {
  XXH3_freeState(static_cast<XXH3_state_t*>(state_));
}

void StateHasher::add(std::string_view name, const TensorView& view) {
  auto* state = static_cast<XXH3_state_t*>(state_);
  uint64_t length = name.size();
  XXH3_128bits_update(state, &length, sizeof(length));
  XXH3_128bits_update(state, name.data(), name.size());
  feed_tensor_header(state, view);
  XXH3_128bits_update(state, view.data, view.nbytes());
}

void StateHasher::add_bytes(const void* data, size_t size) {
  XXH3_128bits_update(static_cast<XXH3_state_t*>(state_), data, size);
}

Hash128 StateHasher::finish() const {
  return from_xxh(XXH3_128bits_digest(static_cast<XXH3_state_t*>(state_)));
}

}  // namespace stoa
