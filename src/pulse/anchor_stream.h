// An anchor decoded straight from its file, tensor by tensor: the reader holds a 1 MiB input
// buffer, the zstd window and one tensor at a time, never the blob nor its inflated payload — so
// a worker loading a 9 GB model from a spool file needs the model's bytes once (in whatever
// the sink keeps) instead of blob + payload + state.
//
// Everything decode_anchor checks is checked, as the bytes stream by: the envelope before the
// first byte of payload; each tensor's hash before the sink sees it; the payload hash, the
// blob's content address (its name on the hub, when given), the fingerprint and the state hash
// when the last byte has been read. The sink therefore receives tensors that are each intact
// but belong to a blob not yet proven whole: it must hold them provisionally until
// stream_anchor_file returns (a throw means: discard everything received).
#pragma once
#include <cstdint>
#include <map>
#include <string>

#include "core/hash.h"
#include "pulse/format.h"
#include "pulse/int8_state.h"

namespace stoa::pulse {

class AnchorSink {
 public:
  virtual ~AnchorSink() = default;
  // Called once, after the envelope was checked and before the first tensor.
  virtual void begin(const BlobHeader& header, const Hash128& config_hash) = 0;
  // Each tensor in name order, its content hash checked (`hash`).
  virtual void tensor(const std::string& name, StateTensor tensor, const Hash128& hash) = 0;
};

struct AnchorInfo {
  BlobHeader header;
  Hash128 config_hash;
  std::map<std::string, Hash128> tensor_hashes;
  uint64_t blob_bytes = 0;
};

// Throws kBadFormat (malformed, truncated), kIntegrity (a hash or the content address does not
// match) or kIo (the file cannot be read), naming the file. With `expected_blob_hash`, a file
// that fails part-way is hashed whole: if it is not the named blob (a transfer gone wrong, worth
// a refetch) the error is that kIntegrity ("N bytes hashing to X, not to the blob's name").
AnchorInfo stream_anchor_file(const std::string& path, const Hash128* expected_blob_hash,
                              AnchorSink& sink, const DecodeLimits& limits = {});

// The content address of a blob file (xxh3-128 of its bytes, read in 1 MiB chunks); `bytes` is
// set to its length. kIo when it cannot be read.
Hash128 hash_blob_file(const std::string& path, uint64_t* bytes);

// decode_anchor for a file: the state, checked as above.
Int8State decode_anchor_file(const std::string& path, const Hash128* expected_blob_hash = nullptr,
                             const DecodeLimits& limits = {});

}  // namespace stoa::pulse
