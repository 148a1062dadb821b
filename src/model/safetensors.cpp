#include "model/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "model/mapped_pages.h"

namespace stoa {

namespace {

// Far above any real header (LFM2-8B-A1B's is ~200 KB); bounds the memory a hostile length
// field can make us allocate.
constexpr uint64_t kMaxHeaderBytes = uint64_t{100} << 20;
constexpr size_t kMaxRank = 16;
// A safetensors header is at most 3 levels deep: {name: {"shape": [..]}}.
constexpr int kMaxDepth = 3;

// The dtypes of the safetensors spec we do not handle: valid files, so kUnsupported.
bool is_other_spec_dtype(const std::string& name) {
  static const std::set<std::string> names = {"BOOL",    "I16",     "U16",     "U32",     "U64",
                                              "F64",     "F8_E4M3", "F8_E5M2", "F8_E8M0", "F6_E2M3",
                                              "F6_E3M2", "F4",      "C64"};
  return names.count(name) != 0;
}

bool safetensors_dtype(const std::string& name, DType* out) {
  for (DType d :
       {DType::kF32, DType::kBF16, DType::kF16, DType::kI8, DType::kU8, DType::kI32, DType::kI64}) {
    if (name == safetensors_dtype_name(d)) {
      *out = d;
      return true;
    }
  }
  return false;
}

struct TooDeep {};

std::string short_dump(const nlohmann::json& value) {
  std::string text = value.dump();
  if (text.size() > 60) text = text.substr(0, 57) + "...";
  return text;
}

}  // namespace

SafetensorsFile::SafetensorsFile(SafetensorsFile&& other) noexcept {
  *this = std::move(other);
}

SafetensorsFile& SafetensorsFile::operator=(SafetensorsFile&& other) noexcept {
  if (this != &other) {
    if (mapping_) munmap(mapping_, size_);
    source_ = std::move(other.source_);
    data_ = other.data_;
    size_ = other.size_;
    mapping_ = other.mapping_;
    owned_ = std::move(other.owned_);
    entries_ = std::move(other.entries_);
    metadata_ = std::move(other.metadata_);
    other.data_ = nullptr;
    other.size_ = 0;
    other.mapping_ = nullptr;
  }
  return *this;
}

SafetensorsFile::~SafetensorsFile() {
  if (mapping_) munmap(mapping_, size_);
}

SafetensorsFile SafetensorsFile::open(const std::string& path) {
  SafetensorsFile file;
  file.source_ = path;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    fail(errno == ENOENT ? ErrorKind::kNotFound : ErrorKind::kIo, path,
         ": cannot open safetensors file: ", std::strerror(errno));
  }
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    int err = errno;
    ::close(fd);
    fail(ErrorKind::kIo, path, ": stat failed: ", std::strerror(err));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    fail(ErrorKind::kBadFormat, path, ": not a regular file");
  }
  file.size_ = static_cast<size_t>(st.st_size);
  if (file.size_ == 0) {
    ::close(fd);
    fail(ErrorKind::kBadFormat, path, ": safetensors file is empty");
  }
  void* map = mmap(nullptr, file.size_, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
  int err = errno;
  ::close(fd);
  if (map == MAP_FAILED) fail(ErrorKind::kIo, path, ": mmap failed: ", std::strerror(err));
  file.mapping_ = map;
  file.data_ = static_cast<const uint8_t*>(map);
  file.parse();
  return file;
}

SafetensorsFile SafetensorsFile::from_bytes(std::vector<uint8_t> bytes, const std::string& source) {
  SafetensorsFile file;
  file.source_ = source;
  file.owned_ = std::move(bytes);
  file.data_ = file.owned_.data();
  file.size_ = file.owned_.size();
  file.parse();
  return file;
}

void SafetensorsFile::parse() {
  const std::string& src = source_;
  if (size_ < 8) {
    fail(ErrorKind::kBadFormat, src, ": safetensors file is ", size_,
         " bytes, too short for the 8-byte header length");
  }
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | data_[i];
  if (header_len > size_ - 8) {
    fail(ErrorKind::kBadFormat, src, ": header length ", header_len, " exceeds the file size ",
         size_, " (truncated or not a safetensors file)");
  }
  if (header_len > kMaxHeaderBytes) {
    fail(ErrorKind::kBadFormat, src, ": header length ", header_len, " exceeds the limit of ",
         kMaxHeaderBytes, " bytes");
  }
  const char* header = reinterpret_cast<const char*>(data_ + 8);
  const uint64_t data_start = 8 + header_len;
  const uint64_t data_size = size_ - data_start;

  // nlohmann keeps one value for a repeated key; a repeated tensor name must be an error
  // instead, so top-level keys are collected as they are parsed.
  std::set<std::string> seen;
  std::string duplicate;
  auto callback = [&](int depth, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
    using E = nlohmann::json::parse_event_t;
    if ((event == E::object_start || event == E::array_start) && depth >= kMaxDepth)
      throw TooDeep{};
    if (event == E::key && depth == 1) {
      std::string key = parsed.get<std::string>();
      if (!seen.insert(key).second && duplicate.empty()) duplicate = key;
    }
    return true;
  };
  nlohmann::json root;
  try {
    root = nlohmann::json::parse(header, header + header_len, callback);
  } catch (const TooDeep&) {
    fail(ErrorKind::kBadFormat, src, ": header JSON is nested deeper than a safetensors header");
  } catch (const nlohmann::json::exception& e) {
    fail(ErrorKind::kBadFormat, src, ": header is not valid JSON: ", e.what());
  }
  if (!duplicate.empty())
    fail(ErrorKind::kBadFormat, src, ": tensor '", duplicate, "' appears twice");
  if (!root.is_object()) fail(ErrorKind::kBadFormat, src, ": header is not a JSON object");

  entries_.clear();
  metadata_.clear();
  for (auto it = root.begin(); it != root.end(); ++it) {
    const std::string& name = it.key();
    const nlohmann::json& info = it.value();
    if (name == "__metadata__") {
      if (!info.is_object()) fail(ErrorKind::kBadFormat, src, ": __metadata__ is not an object");
      for (auto m = info.begin(); m != info.end(); ++m) {
        if (!m.value().is_string()) {
          fail(ErrorKind::kBadFormat, src, ": __metadata__ value of '", m.key(),
               "' is not a string");
        }
        metadata_[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    auto bad = [&](auto&&... what) {
      fail(ErrorKind::kBadFormat, src, ": tensor '", name, "': ", what...);
    };
    if (name.empty()) bad("empty tensor name");
    if (!info.is_object()) bad("entry is not an object");
    SafetensorsEntry entry;
    entry.name = name;

    auto dtype_it = info.find("dtype");
    if (dtype_it == info.end() || !dtype_it->is_string()) bad("missing or non-string 'dtype'");
    std::string dtype_name = dtype_it->get<std::string>();
    if (!safetensors_dtype(dtype_name, &entry.dtype)) {
      if (is_other_spec_dtype(dtype_name)) {
        fail(ErrorKind::kUnsupported, src, ": tensor '", name, "': dtype ", dtype_name,
             " is not supported");
      }
      bad("unknown dtype '", dtype_name, "'");
    }

    auto shape_it = info.find("shape");
    if (shape_it == info.end() || !shape_it->is_array()) bad("missing or non-list 'shape'");
    if (shape_it->size() > kMaxRank) bad("rank ", shape_it->size(), " exceeds ", kMaxRank);
    uint64_t numel = 1;
    for (const nlohmann::json& dim : *shape_it) {
      if (!dim.is_number_unsigned()) bad("shape ", short_dump(*shape_it), " has a non-natural dim");
      uint64_t d = dim.get<uint64_t>();
      if (d > static_cast<uint64_t>(INT64_MAX) || __builtin_mul_overflow(numel, d, &numel)) {
        bad("shape ", short_dump(*shape_it), " overflows");
      }
      entry.shape.push_back(static_cast<int64_t>(d));
    }

    auto off_it = info.find("data_offsets");
    if (off_it == info.end() || !off_it->is_array() || off_it->size() != 2 ||
        !(*off_it)[0].is_number_unsigned() || !(*off_it)[1].is_number_unsigned()) {
      bad("'data_offsets' must be a list of two non-negative integers");
    }
    uint64_t begin = (*off_it)[0].get<uint64_t>(), end = (*off_it)[1].get<uint64_t>();
    if (begin > end) bad("data_offsets [", begin, ", ", end, "] are reversed");
    if (end > data_size) {
      bad("data_offsets [", begin, ", ", end, "] (file bytes ", data_start + begin, "..",
          data_start + end, ") run past the data section (", data_size,
          " bytes, ending at file byte ", size_, "; truncated file?)");
    }
    uint64_t expected = 0;
    if (__builtin_mul_overflow(numel, dtype_size(entry.dtype), &expected) ||
        expected != end - begin) {
      bad("data_offsets [", begin, ", ", end, "] hold ", end - begin, " bytes but shape ",
          shape_string(entry.shape), " of ", dtype_name, " needs ", numel, " x ",
          dtype_size(entry.dtype));
    }
    entry.offset = data_start + begin;
    entry.nbytes = end - begin;
    entries_.push_back(std::move(entry));
  }

  // The tensors must tile the data section: sort by position and walk it.
  std::vector<const SafetensorsEntry*> by_offset;
  for (const SafetensorsEntry& e : entries_) by_offset.push_back(&e);
  std::sort(by_offset.begin(), by_offset.end(), [](const auto* a, const auto* b) {
    return a->offset != b->offset ? a->offset < b->offset : a->nbytes < b->nbytes;
  });
  uint64_t cursor = data_start;
  const SafetensorsEntry* previous = nullptr;
  for (const SafetensorsEntry* e : by_offset) {
    if (e->offset < cursor) {
      fail(ErrorKind::kBadFormat, src, ": tensor '", e->name, "' overlaps tensor '",
           previous ? previous->name : "", "'");
    }
    if (e->offset > cursor) {
      fail(ErrorKind::kBadFormat, src, ": ", e->offset - cursor, " unused bytes before tensor '",
           e->name, "'");
    }
    cursor = e->offset + e->nbytes;
    previous = e;
  }
  if (cursor != size_) {
    fail(ErrorKind::kBadFormat, src, ": ", size_ - cursor,
         " bytes after the last tensor are not described by the header");
  }
  std::sort(entries_.begin(), entries_.end(),
            [](const auto& a, const auto& b) { return a.name < b.name; });
}

const SafetensorsEntry* SafetensorsFile::find(const std::string& name) const {
  auto it =
      std::lower_bound(entries_.begin(), entries_.end(), name,
                       [](const SafetensorsEntry& e, const std::string& n) { return e.name < n; });
  return it != entries_.end() && it->name == name ? &*it : nullptr;
}

TensorView SafetensorsFile::view(const std::string& name) const {
  const SafetensorsEntry* e = find(name);
  if (!e) fail(ErrorKind::kNotFound, source_, ": no tensor '", name, "'");
  return TensorView(const_cast<uint8_t*>(data_ + e->offset), e->dtype, e->shape);
}

bool SafetensorsFile::is_aligned(const std::string& name) const {
  TensorView v = view(name);
  return reinterpret_cast<uintptr_t>(v.data) % dtype_size(v.dtype) == 0;
}

void SafetensorsFile::release_pages(const std::string& name) const {
  if (!mapping_) return;  // an in-memory image: nothing to hand back
  const SafetensorsEntry* e = find(name);
  if (e) release_mapped_pages(data_ + e->offset, e->nbytes);
}

Tensor SafetensorsFile::load(const std::string& name) const {
  TensorView v = view(name);
  Tensor out(v.dtype, v.shape);
  if (v.nbytes() > 0) std::memcpy(out.data(), v.data, v.nbytes());
  return out;
}

namespace {

struct Layout {
  std::string header;  // padded JSON, without the 8-byte length
  std::vector<const NamedView*> order;
};

Layout plan_layout(const std::vector<NamedView>& tensors,
                   const std::map<std::string, std::string>& metadata) {
  Layout layout;
  std::set<std::string> names;
  for (const NamedView& t : tensors) {
    STOA_CHECK(!t.first.empty() && t.first != "__metadata__", ErrorKind::kInvalidArgument,
               "safetensors: invalid tensor name '", t.first, "'");
    STOA_CHECK(names.insert(t.first).second, ErrorKind::kInvalidArgument, "safetensors: tensor '",
               t.first, "' given twice");
    STOA_CHECK(t.second.is_contiguous(), ErrorKind::kInvalidArgument, "safetensors: tensor '",
               t.first, "' is not contiguous");
    layout.order.push_back(&t);
  }
  // Largest element first: every tensor then starts at a multiple of its element size.
  std::sort(layout.order.begin(), layout.order.end(), [](const NamedView* a, const NamedView* b) {
    size_t sa = dtype_size(a->second.dtype), sb = dtype_size(b->second.dtype);
    return sa != sb ? sa > sb : a->first < b->first;
  });
  nlohmann::json header = nlohmann::json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  uint64_t offset = 0;
  for (const NamedView* t : layout.order) {
    uint64_t nbytes = t->second.nbytes();
    header[t->first] = {{"dtype", safetensors_dtype_name(t->second.dtype)},
                        {"shape", t->second.shape},
                        {"data_offsets", {offset, offset + nbytes}}};
    offset += nbytes;
  }
  layout.header = header.dump();
  while ((8 + layout.header.size()) % 8 != 0) layout.header.push_back(' ');
  return layout;
}

void put_le64(uint64_t value, uint8_t* out) {
  for (int i = 0; i < 8; ++i) out[i] = static_cast<uint8_t>(value >> (8 * i));
}

}  // namespace

std::vector<uint8_t> serialize_safetensors(const std::vector<NamedView>& tensors,
                                           const std::map<std::string, std::string>& metadata) {
  Layout layout = plan_layout(tensors, metadata);
  size_t total = 8 + layout.header.size();
  for (const NamedView* t : layout.order) total += t->second.nbytes();
  std::vector<uint8_t> out(total);
  put_le64(layout.header.size(), out.data());
  std::memcpy(out.data() + 8, layout.header.data(), layout.header.size());
  size_t pos = 8 + layout.header.size();
  for (const NamedView* t : layout.order) {
    if (t->second.nbytes() > 0) std::memcpy(out.data() + pos, t->second.data, t->second.nbytes());
    pos += t->second.nbytes();
  }
  return out;
}

void write_safetensors(const std::string& path, const std::vector<NamedView>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  Layout layout = plan_layout(tensors, metadata);
  std::string tmp = cat(path, ".tmp.", getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) fail(ErrorKind::kIo, path, ": cannot create ", tmp, ": ", std::strerror(errno));
    uint8_t len[8];
    put_le64(layout.header.size(), len);
    out.write(reinterpret_cast<const char*>(len), 8);
    out.write(layout.header.data(), static_cast<std::streamsize>(layout.header.size()));
    for (const NamedView* t : layout.order) {
      out.write(static_cast<const char*>(t->second.data),
                static_cast<std::streamsize>(t->second.nbytes()));
    }
    out.flush();
    if (!out) {
      std::remove(tmp.c_str());
      fail(ErrorKind::kIo, path, ": write failed: ", std::strerror(errno));
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    std::remove(tmp.c_str());
    fail(ErrorKind::kIo, path, ": rename failed: ", std::strerror(err));
  }
}

void write_safetensors_streamed(const std::string& path,
                                const std::vector<SafetensorsPlanned>& tensors,
                                const std::map<std::string, std::string>& metadata,
                                const SafetensorsProducer& produce) {
  // The layout needs only names, dtypes and shapes: plan it on data-less views.
  std::vector<NamedView> shapes;
  shapes.reserve(tensors.size());
  for (const SafetensorsPlanned& t : tensors)
    shapes.emplace_back(t.name, TensorView(nullptr, t.dtype, t.shape));
  Layout layout = plan_layout(shapes, metadata);
  std::string tmp = cat(path, ".tmp.", getpid());
  std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
  if (!out) fail(ErrorKind::kIo, path, ": cannot create ", tmp, ": ", std::strerror(errno));
  try {
    uint8_t len[8];
    put_le64(layout.header.size(), len);
    out.write(reinterpret_cast<const char*>(len), 8);
    out.write(layout.header.data(), static_cast<std::streamsize>(layout.header.size()));
    for (const NamedView* slot : layout.order) {
      const SafetensorsPlanned& planned = tensors[static_cast<size_t>(slot - shapes.data())];
      Tensor t = produce(planned);
      STOA_CHECK(t.dtype() == planned.dtype && t.shape() == planned.shape, ErrorKind::kInternal,
                 path, ": tensor '", planned.name, "' came as ", dtype_name(t.dtype()), " ",
                 shape_string(t.shape()), ", planned ", dtype_name(planned.dtype), " ",
                 shape_string(planned.shape));
      out.write(static_cast<const char*>(t.data()), static_cast<std::streamsize>(t.nbytes()));
      if (!out)
        fail(ErrorKind::kIo, path, ": write failed at tensor '", planned.name,
             "': ", std::strerror(errno), " (disk full?)");
    }
    out.flush();
    if (!out) fail(ErrorKind::kIo, path, ": write failed: ", std::strerror(errno));
    out.close();
  } catch (...) {
    out.close();
    std::remove(tmp.c_str());  // nothing half-written stays behind
    throw;
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    std::remove(tmp.c_str());
    fail(ErrorKind::kIo, path, ": rename failed: ", std::strerror(err));
  }
}

SafetensorsSet SafetensorsSet::open_dir(const std::string& dir) {
  namespace fs = std::filesystem;
  SafetensorsSet set;
  fs::path index_path = fs::path(dir) / "model.safetensors.index.json";
  fs::path single_path = fs::path(dir) / "model.safetensors";
  if (!fs::exists(index_path)) {
    if (!fs::exists(single_path)) {
      fail(ErrorKind::kNotFound, dir,
           ": no model.safetensors or model.safetensors.index.json in the model directory");
    }
    set.description_ = single_path.string();
    set.files_.push_back(
        std::make_unique<SafetensorsFile>(SafetensorsFile::open(single_path.string())));
    for (const SafetensorsEntry& e : set.files_[0]->entries()) set.file_index_[e.name] = 0;
    return set;
  }

  const std::string src = index_path.string();
  set.description_ = src;
  std::ifstream in(index_path, std::ios::binary);
  if (!in) fail(ErrorKind::kIo, src, ": cannot open");
  std::ostringstream text;
  text << in.rdbuf();
  nlohmann::json index;
  try {
    index = nlohmann::json::parse(text.str());
  } catch (const nlohmann::json::exception& e) {
    fail(ErrorKind::kBadFormat, src, ": not valid JSON: ", e.what());
  }
  if (!index.is_object() || !index.contains("weight_map") || !index["weight_map"].is_object()) {
    fail(ErrorKind::kBadFormat, src, ": missing 'weight_map' object");
  }
  std::map<std::string, size_t> shard_ids;
  for (auto it = index["weight_map"].begin(); it != index["weight_map"].end(); ++it) {
    if (!it.value().is_string()) {
      fail(ErrorKind::kBadFormat, src, ": weight_map entry of '", it.key(), "' is not a string");
    }
    std::string shard = it.value().get<std::string>();
    // Shards are siblings of the index: a path could read any file on the machine.
    if (shard.empty() || shard.find('/') != std::string::npos ||
        shard.find('\\') != std::string::npos || shard == "." || shard == "..") {
      fail(ErrorKind::kBadFormat, src, ": weight_map entry of '", it.key(), "' names '", shard,
           "', not a file in the model directory");
    }
    auto [pos, inserted] = shard_ids.emplace(shard, set.files_.size());
    if (inserted) {
      set.files_.push_back(std::make_unique<SafetensorsFile>(
          SafetensorsFile::open((fs::path(dir) / shard).string())));
    }
    const SafetensorsFile& file = *set.files_[pos->second];
    if (!file.has(it.key())) {
      fail(ErrorKind::kBadFormat, src, ": tensor '", it.key(), "' is mapped to ", shard,
           " but that file does not contain it");
    }
    set.file_index_[it.key()] = pos->second;
  }
  for (const auto& file : set.files_) {
    for (const SafetensorsEntry& e : file->entries()) {
      auto found = set.file_index_.find(e.name);
      if (found == set.file_index_.end() || set.files_[found->second].get() != file.get()) {
        fail(ErrorKind::kBadFormat, file->source(), ": tensor '", e.name,
             "' is not mapped to this file by ", src);
      }
    }
  }
  return set;
}

std::vector<std::string> SafetensorsSet::names() const {
  std::vector<std::string> out;
  for (const auto& [name, index] : file_index_) out.push_back(name);
  return out;
}

const SafetensorsEntry* SafetensorsSet::find(const std::string& name) const {
  auto it = file_index_.find(name);
  return it == file_index_.end() ? nullptr : files_[it->second]->find(name);
}

const SafetensorsFile& SafetensorsSet::file_of(const std::string& name) const {
  auto it = file_index_.find(name);
  if (it == file_index_.end()) fail(ErrorKind::kNotFound, description_, ": no tensor '", name, "'");
  return *files_[it->second];
}

}  // namespace stoa
