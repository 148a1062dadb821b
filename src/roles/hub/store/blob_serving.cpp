#include "roles/hub/store/blob_serving.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <vector>

#include "core/error.h"
#include "roles/hub/hub.h"

namespace stoa::hub {

namespace {

// Timestamps this close to "now" may not change on the next write (coarse file-system clocks).
constexpr int64_t kRacyWindowNs = 2'000'000'000;

bool parse_u64(const std::string& s, uint64_t* out) {
  if (s.empty() || s.size() > 19 || s.find_first_not_of("0123456789") != std::string::npos) {
    return false;
  }
  *out = std::stoull(s);
  return true;
}

int64_t now_ns() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

}  // namespace

RangeParse parse_range(const std::string& header, uint64_t size, ByteRange* out) {
  const std::string unit = "bytes=";
  if (header.compare(0, unit.size(), unit) != 0) return RangeParse::kNone;
  std::string spec = header.substr(unit.size());
  while (!spec.empty() && spec.back() == ' ') spec.pop_back();
  while (!spec.empty() && spec.front() == ' ') spec.erase(spec.begin());
  if (spec.find(',') != std::string::npos) return RangeParse::kNone;  // several: send it all
  size_t dash = spec.find('-');
  if (dash == std::string::npos) return RangeParse::kNone;
  std::string a = spec.substr(0, dash), b = spec.substr(dash + 1);
  uint64_t first = 0, last = 0;
  if (a.empty()) {  // bytes=-n: the last n bytes
    if (!parse_u64(b, &last)) return RangeParse::kNone;
    if (last == 0 || size == 0) return RangeParse::kUnsatisfiable;
    out->length = std::min(last, size);
    out->first = size - out->length;
    return RangeParse::kRange;
  }
  if (!parse_u64(a, &first)) return RangeParse::kNone;
  if (b.empty()) {
    last = size == 0 ? 0 : size - 1;
  } else if (!parse_u64(b, &last) || last < first) {
    return RangeParse::kNone;
  }
  if (first >= size) return RangeParse::kUnsatisfiable;
  last = std::min(last, size - 1);
  out->first = first;
  out->length = last - first + 1;
  return RangeParse::kRange;
}

std::shared_ptr<BlobServing::Entry> BlobServing::entry(const std::string& hex) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto& e = entries_[hex];
  if (!e) e = std::make_shared<Entry>();
  return e;
}

void BlobServing::verify(const std::string& hex, const std::string& path, const Identity& id) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  STOA_CHECK(fd >= 0, ErrorKind::kIo, "cannot open ", path, ": ", std::strerror(errno));
  XXH3_state_t* state = XXH3_createState();
  XXH3_128bits_reset(state);
  std::vector<char> buffer(1u << 20);
  uint64_t total = 0;
  for (;;) {
    ssize_t n = ::read(fd, buffer.data(), buffer.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    XXH3_128bits_update(state, buffer.data(), static_cast<size_t>(n));
    total += static_cast<uint64_t>(n);
  }
  ::close(fd);
  XXH128_hash_t h = XXH3_128bits_digest(state);
  XXH3_freeState(state);
  Hash128 got{h.high64, h.low64};
  STOA_CHECK(got.hex() == hex && total == id.size, ErrorKind::kIntegrity, "blob ", path,
             " is corrupt: its ", total, " bytes hash to ", got.hex());
}

HttpReply BlobServing::serve(const Hash128& hash, const RequestContext& request,
                             const std::string& worker) {
  const std::string hex = hash.hex();
  const std::string path = store_.path_of(hash);
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) {
    throw RequestError(404, cat("no blob ", hex));
  }
  Identity id{static_cast<uint64_t>(st.st_ino), static_cast<uint64_t>(st.st_size),
              static_cast<int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec,
              static_cast<int64_t>(st.st_ctim.tv_sec) * 1'000'000'000 + st.st_ctim.tv_nsec};
  {
    auto e = entry(hex);
    std::lock_guard<std::mutex> lock(e->verifying);
    if (e->verified != id) {
      e->verified.reset();
      verify(hex, path, id);
      if (now_ns() - std::max(id.mtime_ns, id.ctime_ns) > kRacyWindowNs) e->verified = id;
    }
  }

  const std::string etag = "\"" + hex + "\"";
  HttpReply reply;
  reply.content_type = "application/octet-stream";
  reply.headers = {{"Cache-Control", "public, max-age=31536000, immutable"},
                   {"ETag", etag},
                   {"Accept-Ranges", "bytes"}};
  ByteRange range{0, id.size};
  std::string range_header = request.header("range");
  std::string if_range = request.header("if-range");
  RangeParse kind = RangeParse::kNone;
  // If-Range: the range holds only for this exact entity; anything else gets the whole blob.
  if (!range_header.empty() && (if_range.empty() || if_range == etag)) {
    kind = parse_range(range_header, id.size, &range);
  }
  if (kind == RangeParse::kUnsatisfiable) {
    reply.status = 416;
    reply.content_type = "application/json";
    reply.body = nlohmann::json{{"error", cat("range '", range_header.substr(0, 80),
                                              "' is outside blob ", hex, " (", id.size, " bytes)")}}
                     .dump();
    reply.headers.emplace_back("Content-Range", cat("bytes */", id.size));
    return reply;
  }
  if (kind == RangeParse::kRange) {
    reply.status = 206;
    reply.headers.emplace_back("Content-Range", cat("bytes ", range.first, "-",
                                                    range.first + range.length - 1, "/", id.size));
  } else {
    range = {0, id.size};
  }
  reply.file = FileBody{path, range.first, range.length, {}};
  if (!allowance_ || worker.empty()) return reply;
  const std::chrono::seconds wait = allowance_->take(worker, hash, id.size, range.length);
  if (wait.count() > 0) {
    HttpReply refused;
    refused.status = 429;
    refused.body = nlohmann::json{
        {"error", cat("blob ", hex,
                      ": this worker has taken as much of it as the "
                      "hub sends one worker ([hub] fetches_per_blob times its "
                      "size, refilled by one size per fetch_refill_s); retry in ",
                      wait.count(), " s")},
        {"retry_after_ms",
         wait.count() *
             1000}}.dump();
    refused.headers.emplace_back("Retry-After", std::to_string(wait.count()));
    return refused;
  }
  reply.file->on_end = [allowance = std::weak_ptr<FetchAllowance>(allowance_), worker, hash,
                        length = range.length](bool complete, uint64_t delivered) {
    if (complete) return;
    if (auto a = allowance.lock()) a->give_back(worker, hash, length - std::min(length, delivered));
  };
  return reply;
}

}  // namespace stoa::hub
