// An anchor written to a file tensor by tensor: the writer holds one tensor's section and the
// zstd stream's buffers, never the state nor its payload — so a publisher can turn a model it
// reads one tensor at a time (a Q8_0 GGUF, the trainer's int8 view) into an anchor of any size.
// The bytes are those of encode_anchor for the same state (tested): the envelope is written last,
// once the payload hash, the state hash and the sizes are known; the payload size is pledged to
// zstd up front (the decoder requires the frame to declare it), computed from the layouts.
#pragma once
#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/hash.h"
#include "pulse/format.h"
#include "pulse/int8_state.h"

namespace stoa::pulse {

struct WrittenAnchor {
  BlobHeader header;
  Hash128 blob_hash;  // xxh3-128 of the whole file: its name in a BlobStore
  uint64_t bytes = 0;
};

class AnchorFileWriter {
 public:
  // `layouts` must be sorted by name; tensors are then added in that order.
  AnchorFileWriter(std::string path, uint64_t version, const Hash128& config_hash,
                   std::vector<TensorLayout> layouts, int zstd_level = 1);
  ~AnchorFileWriter();
  AnchorFileWriter(const AnchorFileWriter&) = delete;
  AnchorFileWriter& operator=(const AnchorFileWriter&) = delete;

  // The next tensor in layout order (kind and shape must match its layout).
  void add(const std::string& name, const StateTensor& tensor);
  // Writes the envelope, flushes and fsyncs, and hashes the file (read back once).
  WrittenAnchor finish();

 private:
  void compress(const void* data, size_t size);
  void write_out(const void* data, size_t size);
  std::string path_;
  uint64_t version_;
  Hash128 config_hash_;
  std::vector<TensorLayout> layouts_;
  size_t next_ = 0;
  std::map<std::string, Hash128> hashes_;
  std::FILE* file_ = nullptr;
  void* cctx_ = nullptr;                         // ZSTD_CCtx*, kept opaque
  std::unique_ptr<StateHasher> payload_hasher_;  // fed raw bytes: xxh3-128 of the payload
  std::vector<uint8_t> out_buffer_;
  uint64_t raw_size_ = 0;
  uint64_t payload_size_ = 0;
  bool finished_ = false;
};

// Moves a finished anchor file into the store under its content address (a rename in the same
// file system; the store's directory must be on it).
void adopt_into_store(const std::string& path, const std::string& store_path);

}  // namespace stoa::pulse
