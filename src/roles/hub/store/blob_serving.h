// GET /v1/blobs/<hash>: a blob streamed from the hub's disk with HTTP Range support, so a worker
// on a bad link resumes a 9 GB anchor instead of starting over. The reply names a file range;
// the server streams it in chunks (no copy of the blob in memory). `ETag` is the content hash,
// `Range: bytes=a-b | a- | -n` answers 206 with Content-Range, an `If-Range` that is not the
// ETag answers the whole blob (200), an unsatisfiable range 416.
//
// A blob corrupted on the hub's disk must never be sent: a file is hashed once and remembered as
// verified by its identity (inode, size, mtime, ctime), not re-hashed per request. A file
// modified within the last seconds is not remembered (its timestamps could still tick within
// the clock's granularity — git's "racy" rule), so it is hashed again next time.
//
// With a FetchAllowance, a reply to a worker is charged its range (fetch_allowance.h): what a
// worker may take of each blob is bounded, and a refused request is answered 429 with
// Retry-After.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "pulse/blob_store.h"
#include "roles/hub/http/http_server.h"
#include "roles/hub/store/fetch_allowance.h"

namespace stoa::hub {

// A single byte range of a `size`-byte entity, from a Range header value.
struct ByteRange {
  uint64_t first = 0;
  uint64_t length = 0;
};
enum class RangeParse { kNone, kRange, kUnsatisfiable };
// kNone: no usable Range (absent, not bytes, several ranges, malformed: the whole entity).
RangeParse parse_range(const std::string& header, uint64_t size, ByteRange* out);

class BlobServing {
 public:
  explicit BlobServing(pulse::BlobStore& store, std::shared_ptr<FetchAllowance> allowance = {})
      : store_(store), allowance_(std::move(allowance)) {}

  // Throws RequestError(404) for a missing blob and Error(kIntegrity) for a corrupt one. A
  // reply to `worker` (empty: a trusted reader, not charged) is charged to its allowance; the
  // file body's on_end gives back what a cut reply did not send.
  HttpReply serve(const Hash128& hash, const RequestContext& request,
                  const std::string& worker = "");

 private:
  struct Identity {
    uint64_t inode = 0, size = 0;
    int64_t mtime_ns = 0, ctime_ns = 0;
    bool operator==(const Identity&) const = default;
  };
  struct Entry {
    std::mutex verifying;  // one hashing per blob at a time; the others wait for its verdict
    std::optional<Identity> verified;
  };
  std::shared_ptr<Entry> entry(const std::string& hex);
  void verify(const std::string& hex, const std::string& path, const Identity& id);

  pulse::BlobStore& store_;
  std::shared_ptr<FetchAllowance> allowance_;  // null: no bound
  std::mutex mutex_;
  std::map<std::string, std::shared_ptr<Entry>> entries_;
};

}  // namespace stoa::hub
