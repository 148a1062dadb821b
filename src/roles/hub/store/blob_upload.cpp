// Chunked, resumable, hash-checked blob upload into the hub's store (blob_upload.h).
#include "roles/hub/store/blob_upload.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <vector>

#include "core/error.h"
#include "roles/hub/hub.h"

namespace stoa::hub {

namespace fs = std::filesystem;

namespace {

Hash128 hash_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  STOA_CHECK(in.good(), ErrorKind::kIo, "hub: cannot read ", path);
  StateHasher hasher;
  std::vector<char> buffer(1 << 20);
  while (in) {
    in.read(buffer.data(), static_cast<std::streamsize>(buffer.size()));
    if (in.gcount() > 0) hasher.add_bytes(buffer.data(), static_cast<size_t>(in.gcount()));
  }
  return hasher.finish();
}

// Durable before it is renamed into the store: the catalog that names it is saved after.
void fsync_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  STOA_CHECK(fd >= 0, ErrorKind::kIo, "hub: cannot open ", path);
  const int rc = ::fsync(fd);
  ::close(fd);
  STOA_CHECK(rc == 0, ErrorKind::kIo, "hub: cannot fsync ", path);
}

}  // namespace

BlobUpload::BlobUpload(pulse::BlobStore& store) : store_(store), dir_(store.dir() + "/uploads") {
  fs::create_directories(dir_);
}

std::string BlobUpload::part_path(const Hash128& hash) const {
  return dir_ + "/" + hash.hex() + ".part";
}

UploadState BlobUpload::state(const Hash128& hash) const {
  std::lock_guard<std::mutex> lock(mutex_);
  UploadState s;
  if (store_.contains(hash)) {
    s.received = store_.size_of(hash);
    s.stored = true;
    return s;
  }
  std::error_code ec;
  const auto size = fs::file_size(part_path(hash), ec);
  s.received = ec ? 0 : size;
  return s;
}

UploadState BlobUpload::append(const Hash128& hash, uint64_t offset, uint64_t total,
                               std::string_view chunk) {
  if (total > kMaxTotal)
    throw RequestError(400,
                       cat("blob ", hash.hex(), ": total ", total, " bytes is over ", kMaxTotal));
  if (offset + chunk.size() > total)
    throw RequestError(400, cat("blob ", hash.hex(), ": a chunk of ", chunk.size(),
                                " bytes at offset ", offset, " runs past its total of ", total));
  std::lock_guard<std::mutex> lock(mutex_);
  UploadState s;
  if (store_.contains(hash)) {  // a repeat, or a blob the hub has from another upload
    s.received = store_.size_of(hash);
    s.stored = true;
    return s;
  }
  const std::string part = part_path(hash);
  std::error_code ec;
  const uint64_t have = fs::exists(part, ec) ? fs::file_size(part, ec) : 0;
  if (offset != have)
    throw RequestError(409, cat("blob ", hash.hex(), ": the hub holds ", have,
                                " bytes of it; send the chunk at offset ", have));
  {
    std::ofstream out(part, std::ios::binary | std::ios::app);
    out.write(chunk.data(), static_cast<std::streamsize>(chunk.size()));
    out.flush();
    STOA_CHECK(out.good(), ErrorKind::kIo, "hub: cannot write ", part);
  }
  s.received = have + chunk.size();
  if (s.received < total) return s;
  const Hash128 got = hash_file(part);
  if (!(got == hash)) {
    fs::remove(part, ec);
    throw RequestError(422, cat("blob ", hash.hex(), ": the ", total, " bytes received hash to ",
                                got.hex(), "; upload it again"));
  }
  fsync_file(part);
  fs::rename(part, store_.path_of(hash));
  s.stored = true;
  return s;
}

}  // namespace stoa::hub
