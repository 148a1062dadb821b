// A content-addressed blob store on disk: a blob's file name is the xxh3-128 hex of its bytes,
// so a hub can serve it as GET /blobs/<hash> with no index, a worker can verify what it fetched,
// and writing the same blob twice is a no-op. Writes are atomic (temp file, fsync, rename):
// a crash never leaves a half-written blob under a valid name.
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/hash.h"

namespace stoa::pulse {

class BlobStore {
 public:
  explicit BlobStore(std::string dir);  // creates the directory if needed

  Hash128 put(std::span<const uint8_t> bytes);
  // Reads and verifies the blob: kNotFound if absent, kIntegrity if its bytes do not hash to
  // its name (disk corruption, a tampered file).
  std::vector<uint8_t> get(const Hash128& hash) const;
  bool contains(const Hash128& hash) const;
  uint64_t size_of(const Hash128& hash) const;  // kNotFound if absent
  std::vector<Hash128> list() const;            // sorted; temp files and other names are ignored
  bool remove(const Hash128& hash);             // true if it existed
  // Removes every blob not in `keep`; returns what it removed.
  std::vector<Hash128> prune(const std::vector<Hash128>& keep);

  std::string path_of(const Hash128& hash) const;
  const std::string& dir() const { return dir_; }

 private:
  std::string dir_;
};

}  // namespace stoa::pulse
