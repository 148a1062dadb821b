// A trainer away from the hub uploads its PULSE blobs (anchors are the model's int8 bytes:
// gigabytes at the seed's size) in chunks under the hub's body limit. Each chunk names its
// offset; a chunk at any other offset than the bytes already received is refused with that
// count, so a trainer resumes an interrupted upload where the hub stands — across a restart of
// either side, since the part file is on disk. The last chunk's bytes are hashed (streaming, the
// part is never held in memory) and the blob enters the store only when they hash to its name.
#pragma once
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>

#include "core/hash.h"
#include "pulse/blob_store.h"

namespace stoa::hub {

struct UploadState {
  uint64_t received = 0;  // bytes of the blob the hub holds
  bool stored = false;    // the whole blob is in the store, checked
};

class BlobUpload {
 public:
  // Parts live in <store dir>/uploads/ (the store's list() ignores them).
  explicit BlobUpload(pulse::BlobStore& store);

  UploadState state(const Hash128& hash) const;
  // Appends `chunk` at `offset` of the blob `hash` of `total` bytes. RequestError 409 (with the
  // bytes received in the message) when offset is not that count, 400 when the chunk runs past
  // total or total is over max_total, 422 when the whole blob does not hash to its name (the
  // part is deleted: the trainer uploads it again).
  UploadState append(const Hash128& hash, uint64_t offset, uint64_t total, std::string_view chunk);

  static constexpr uint64_t kMaxTotal = uint64_t{1} << 40;

 private:
  std::string part_path(const Hash128& hash) const;

  pulse::BlobStore& store_;
  std::string dir_;
  mutable std::mutex mutex_;  // one append at a time: parts are small in number (one trainer)
};

}  // namespace stoa::hub
