#include "pulse/blob_store.h"

#include <algorithm>
#include <filesystem>

#include "core/error.h"
#include "core/file_bytes.h"

namespace stoa::pulse {

namespace fs = std::filesystem;

BlobStore::BlobStore(std::string dir) : dir_(std::move(dir)) {
  std::error_code ec;
  fs::create_directories(dir_, ec);
  STOA_CHECK(!ec && fs::is_directory(dir_), ErrorKind::kIo, "blob store: cannot create ", dir_,
             ": ", ec.message());
}

std::string BlobStore::path_of(const Hash128& hash) const {
  return (fs::path(dir_) / hash.hex()).string();
}

Hash128 BlobStore::put(std::span<const uint8_t> bytes) {
  Hash128 hash = hash_bytes(bytes.data(), bytes.size());
  std::string path = path_of(hash);
  std::error_code ec;
  if (fs::exists(path, ec) && fs::file_size(path, ec) == bytes.size()) return hash;
  write_file_atomic(path, bytes);
  return hash;
}

std::vector<uint8_t> BlobStore::get(const Hash128& hash) const {
  std::string path = path_of(hash);
  STOA_CHECK(fs::exists(path), ErrorKind::kNotFound, "blob store ", dir_, " has no blob ",
             hash.hex());
  std::vector<uint8_t> data = read_file(path);
  Hash128 got = hash_bytes(data.data(), data.size());
  STOA_CHECK(got == hash, ErrorKind::kIntegrity, "blob ", path, " is corrupt: its bytes hash to ",
             got.hex());
  return data;
}

bool BlobStore::contains(const Hash128& hash) const {
  std::error_code ec;
  return fs::exists(path_of(hash), ec);
}

uint64_t BlobStore::size_of(const Hash128& hash) const {
  std::error_code ec;
  uint64_t size = fs::file_size(path_of(hash), ec);
  STOA_CHECK(!ec, ErrorKind::kNotFound, "blob store ", dir_, " has no blob ", hash.hex());
  return size;
}

std::vector<Hash128> BlobStore::list() const {
  std::vector<Hash128> out;
  for (const auto& entry : fs::directory_iterator(dir_)) {
    if (!entry.is_regular_file()) continue;
    Hash128 h;
    if (Hash128::parse(entry.path().filename().string(), &h)) out.push_back(h);
  }
  std::sort(out.begin(), out.end(), [](const Hash128& a, const Hash128& b) {
    return a.high != b.high ? a.high < b.high : a.low < b.low;
  });
  return out;
}

bool BlobStore::remove(const Hash128& hash) {
  std::error_code ec;
  return fs::remove(path_of(hash), ec);
}

std::vector<Hash128> BlobStore::prune(const std::vector<Hash128>& keep) {
  std::vector<Hash128> removed;
  for (const Hash128& h : list()) {
    if (std::find(keep.begin(), keep.end(), h) != keep.end()) continue;
    if (remove(h)) removed.push_back(h);
  }
  return removed;
}

}  // namespace stoa::pulse
