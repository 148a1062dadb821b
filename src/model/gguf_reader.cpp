#include "model/gguf_reader.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <optional>

#include "core/dtype.h"
#include "core/error.h"
#include "model/gguf_arch_map.h"
#include "model/mapped_pages.h"

namespace stoa {

using gguf::GgmlType;
using gguf::Value;
using gguf::ValueType;

int64_t GgufTensorInfo::numel() const {
  int64_t n = 1;
  for (int64_t d : ne) n *= d;
  return n;
}

// The bytes behind a GgufFile: a read-only mapping of the file, or an owned buffer.
struct GgufFile::Storage {
  void* map = nullptr;
  size_t map_size = 0;
  std::vector<uint8_t> owned;
  ~Storage() {
    if (map) munmap(map, map_size);
  }
};

namespace {

// Bounds-checked little-endian reads over the file; every failure names the file, the offset
// and the item being read.
class Cursor {
 public:
  Cursor(const uint8_t* base, uint64_t size, const std::string& source)
      : base_(base), size_(size), source_(source) {}

  uint64_t pos() const { return pos_; }
  uint64_t remaining() const { return size_ - pos_; }

  template <typename T>
  T read(const char* what) {
    need(sizeof(T), what);
    T value;
    std::memcpy(&value, base_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return value;
  }
  // `what` and `owner` (a key or tensor index) only build the message when the read fails, so
  // reading a 150K-entry vocabulary array costs no string formatting.
  std::string read_string(const char* what, const std::string& owner = "") {
    uint64_t n = read<uint64_t>(what);
    if (n > remaining()) need(n, cat(what, owner.empty() ? "" : " of ", owner).c_str());
    std::string s(reinterpret_cast<const char*>(base_ + pos_), static_cast<size_t>(n));
    pos_ += n;
    return s;
  }
  void need(uint64_t n, const char* what) const {
    if (n > remaining())
      fail(ErrorKind::kBadFormat, source_, ": GGUF truncated or corrupt: ", what, " at byte ", pos_,
           " needs ", n, " bytes, only ", remaining(), " remain");
  }
  [[noreturn]] void bad(const std::string& what) const {
    fail(ErrorKind::kBadFormat, source_, ": GGUF corrupt at byte ", pos_, ": ", what);
  }

 private:
  const uint8_t* base_;
  uint64_t size_;
  uint64_t pos_ = 0;
  const std::string& source_;
};

Value read_scalar(Cursor& in, ValueType type, const std::string& key) {
  Value v;
  v.type = type;
  switch (type) {
    case ValueType::kU8:
      v.i = in.read<uint8_t>("u8 value");
      break;
    case ValueType::kI8:
      v.i = in.read<int8_t>("i8 value");
      break;
    case ValueType::kU16:
      v.i = in.read<uint16_t>("u16 value");
      break;
    case ValueType::kI16:
      v.i = in.read<int16_t>("i16 value");
      break;
    case ValueType::kU32:
      v.i = in.read<uint32_t>("u32 value");
      break;
    case ValueType::kI32:
      v.i = in.read<int32_t>("i32 value");
      break;
    case ValueType::kU64:
      v.i = static_cast<int64_t>(in.read<uint64_t>("u64 value"));
      break;
    case ValueType::kI64:
      v.i = in.read<int64_t>("i64 value");
      break;
    case ValueType::kF32:
      v.f = in.read<float>("f32 value");
      break;
    case ValueType::kF64:
      v.f = in.read<double>("f64 value");
      break;
    case ValueType::kBool: {
      uint8_t b = in.read<uint8_t>("bool value");
      if (b > 1) in.bad(cat("metadata '", key, "' holds bool value ", int(b)));
      v.i = b;
      break;
    }
    case ValueType::kString:
      v.str = in.read_string("string value", key);
      break;
    case ValueType::kArray:
      in.bad(cat("metadata '", key, "' nests an array in an array"));
  }
  return v;
}

Value read_value(Cursor& in, const std::string& key) {
  uint32_t type = in.read<uint32_t>("metadata value type");
  if (!gguf::is_valid_value_type(type)) in.bad(cat("metadata '", key, "' has value type ", type));
  if (static_cast<ValueType>(type) != ValueType::kArray)
    return read_scalar(in, static_cast<ValueType>(type), key);
  uint32_t element = in.read<uint32_t>("array element type");
  if (!gguf::is_valid_value_type(element) || static_cast<ValueType>(element) == ValueType::kArray)
    in.bad(cat("metadata '", key, "' is an array of type ", element));
  uint64_t count = in.read<uint64_t>("array length");
  // Every item takes at least this many bytes, so a corrupt count fails here, before allocating.
  size_t min_item = gguf::value_type_size(static_cast<ValueType>(element));
  if (min_item == 0) min_item = 8;  // a string: its u64 length
  if (count > in.remaining() / min_item)
    in.bad(cat("metadata '", key, "' claims ", count, " items, more than the file holds"));
  Value v;
  v.type = ValueType::kArray;
  v.array_type = static_cast<ValueType>(element);
  v.items.reserve(static_cast<size_t>(count));
  for (uint64_t k = 0; k < count; ++k) v.items.push_back(read_scalar(in, v.array_type, key));
  return v;
}

}  // namespace

GgufFile GgufFile::open(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  STOA_CHECK(fd >= 0, ErrorKind::kIo, "cannot open GGUF '", path, "': ", std::strerror(errno));
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    int err = errno;
    ::close(fd);
    fail(ErrorKind::kIo, "cannot stat GGUF '", path, "': ", std::strerror(err));
  }
  auto storage = std::make_shared<Storage>();
  if (st.st_size > 0) {
    void* p = mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      int err = errno;
      ::close(fd);
      fail(ErrorKind::kIo, "cannot mmap GGUF '", path, "': ", std::strerror(err));
    }
    storage->map = p;
    storage->map_size = static_cast<size_t>(st.st_size);
  }
  ::close(fd);
  GgufFile file;
  file.source_ = path;
  file.base_ = static_cast<const uint8_t*>(storage->map);
  file.size_ = storage->map_size;
  file.storage_ = std::move(storage);
  file.parse();
  return file;
}

GgufFile GgufFile::from_bytes(std::vector<uint8_t> bytes, const std::string& source) {
  auto storage = std::make_shared<Storage>();
  storage->owned = std::move(bytes);
  GgufFile file;
  file.source_ = source;
  file.base_ = storage->owned.data();
  file.size_ = storage->owned.size();
  file.storage_ = std::move(storage);
  file.parse();
  return file;
}

void GgufFile::parse() {
  Cursor in(base_, size_, source_);
  uint32_t magic = in.read<uint32_t>("magic");
  if (magic != gguf::kMagic)
    fail(ErrorKind::kBadFormat, source_, ": not a GGUF file (bad magic in the first 4 bytes)");
  version_ = in.read<uint32_t>("version");
  if (version_ != 2 && version_ != 3)
    in.bad(cat("GGUF version ", version_, " is not supported (2 or 3)"));
  uint64_t n_tensors = in.read<uint64_t>("tensor count");
  uint64_t n_kv = in.read<uint64_t>("metadata count");
  // Smallest possible entries: a KV is key length + type + 1 byte; a tensor info is name length +
  // n_dims + one ne + type + offset.
  if (n_kv > in.remaining() / 13) in.bad(cat("metadata count ", n_kv, " exceeds the file size"));
  if (n_tensors > in.remaining() / 32)
    in.bad(cat("tensor count ", n_tensors, " exceeds the file size"));

  for (uint64_t k = 0; k < n_kv; ++k) {
    std::string key = in.read_string("metadata key", std::to_string(k));
    if (key.empty()) in.bad(cat("metadata key #", k, " is empty"));
    Value value = read_value(in, key);
    if (kv_.count(key)) in.bad(cat("metadata key '", key, "' appears twice"));
    kv_.emplace(std::move(key), std::move(value));
  }
  if (const Value* a = find_value("general.alignment")) {
    if (!a->is_integer() || a->i <= 0 || a->i > (1 << 20) || (a->i & (a->i - 1)) != 0)
      in.bad(cat("general.alignment = ", a->describe(), " is not a power of two"));
    alignment_ = static_cast<uint64_t>(a->i);
  }

  for (uint64_t k = 0; k < n_tensors; ++k) {
    GgufTensorInfo info;
    info.name = in.read_string("tensor name", std::to_string(k));
    if (info.name.empty() || info.name.size() > 256)
      in.bad(cat("tensor #", k, " has a name of ", info.name.size(), " bytes"));
    uint32_t n_dims = in.read<uint32_t>("tensor rank");
    if (n_dims < 1 || n_dims > 4) in.bad(cat("tensor '", info.name, "' has rank ", n_dims));
    uint64_t numel = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      uint64_t n = in.read<uint64_t>("tensor dimension");
      if (n == 0 || n > (uint64_t{1} << 40))
        in.bad(cat("tensor '", info.name, "' has dimension ", d, " = ", n));
      if (numel > (uint64_t{1} << 48) / n) in.bad(cat("tensor '", info.name, "' is too large"));
      numel *= n;
      info.ne.push_back(static_cast<int64_t>(n));
    }
    uint32_t type = in.read<uint32_t>("tensor type");
    if (!gguf::is_supported_ggml_type(type))
      in.bad(cat("tensor '", info.name, "' has ggml type ", type,
                 ", Stoa reads F32, F16, BF16 and Q8_0"));
    info.type = static_cast<GgmlType>(type);
    if (info.type == GgmlType::kQ8_0 && info.ne[0] % gguf::kQ8BlockValues != 0)
      in.bad(cat("Q8_0 tensor '", info.name, "' has rows of ", info.ne[0],
                 " values, not a multiple of 32"));
    info.nbytes =
        gguf::row_bytes(info.type, info.ne[0]) * (numel / static_cast<uint64_t>(info.ne[0]));
    info.offset = in.read<uint64_t>("tensor offset");
    if (info.offset % alignment_ != 0)
      in.bad(
          cat("tensor '", info.name, "' offset ", info.offset, " is not aligned to ", alignment_));
    if (tensor_index_.count(info.name)) in.bad(cat("tensor '", info.name, "' appears twice"));
    tensor_index_[info.name] = tensors_.size();
    tensors_.push_back(std::move(info));
  }
  data_start_ = (in.pos() + alignment_ - 1) / alignment_ * alignment_;
  uint64_t data_size = data_start_ <= size_ ? size_ - data_start_ : 0;
  if (!tensors_.empty() && data_start_ > size_)
    fail(ErrorKind::kBadFormat, source_, ": GGUF truncated: tensor data would start at byte ",
         data_start_, " of a ", size_, "-byte file");
  std::vector<const GgufTensorInfo*> by_offset;
  for (const GgufTensorInfo& t : tensors_) {
    if (t.offset > data_size || t.nbytes > data_size - t.offset)
      fail(ErrorKind::kBadFormat, source_, ": GGUF truncated or corrupt: tensor '", t.name,
           "' needs bytes ", t.offset, "..", t.offset + t.nbytes,
           " of the data section, which has ", data_size);
    by_offset.push_back(&t);
  }
  std::sort(by_offset.begin(), by_offset.end(),
            [](auto* a, auto* b) { return a->offset < b->offset; });
  for (size_t k = 1; k < by_offset.size(); ++k)
    if (by_offset[k]->offset < by_offset[k - 1]->offset + by_offset[k - 1]->nbytes)
      fail(ErrorKind::kBadFormat, source_, ": GGUF corrupt: tensors '", by_offset[k - 1]->name,
           "' and '", by_offset[k]->name, "' overlap");
  // As ggml's own reader requires: the data lies in table order, each tensor at the end of the
  // one before, padded to the alignment. A corrupted offset, type or dimension then cannot make
  // a tensor read other bytes (or fewer) without notice.
  uint64_t expected = 0;
  for (const GgufTensorInfo& t : tensors_) {
    if (t.offset != expected)
      fail(ErrorKind::kBadFormat, source_, ": GGUF corrupt: tensor '", t.name, "' at offset ",
           t.offset, ", expected ", expected, " (tensor data lies back to back in table order)");
    expected += (t.nbytes + alignment_ - 1) / alignment_ * alignment_;
  }
}

const Value* GgufFile::find_value(const std::string& key) const {
  auto it = kv_.find(key);
  return it == kv_.end() ? nullptr : &it->second;
}

const GgufTensorInfo* GgufFile::find_tensor(const std::string& name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

std::span<const uint8_t> GgufFile::tensor_bytes(const GgufTensorInfo& info) const {
  return {base_ + data_start_ + info.offset, static_cast<size_t>(info.nbytes)};
}

Tensor GgufFile::read_f32(const GgufTensorInfo& info) const {
  Tensor out(DType::kF32, info.shape());
  float* dst = out.as<float>();
  const uint8_t* src = tensor_bytes(info).data();
  size_t n = static_cast<size_t>(info.numel());
  switch (info.type) {
    case GgmlType::kF32:
      std::memcpy(dst, src, n * 4);
      break;
    case GgmlType::kF16:
      for (size_t k = 0; k < n; ++k) {
        uint16_t h;
        std::memcpy(&h, src + 2 * k, 2);
        dst[k] = f16_to_f32(h);
      }
      break;
    case GgmlType::kBF16:
      for (size_t k = 0; k < n; ++k) {
        uint16_t h;
        std::memcpy(&h, src + 2 * k, 2);
        dst[k] = bf16_to_f32(h);
      }
      break;
    case GgmlType::kQ8_0:
      gguf::dequantize_q8_0(src, n / gguf::kQ8BlockValues, dst);
      break;
  }
  for (size_t k = 0; k < n; ++k)
    if (!std::isfinite(dst[k]))
      fail(ErrorKind::kBadFormat, source_, ": GGUF tensor '", info.name,
           "' holds a non-finite value at element ", k);
  return out;
}

Int8Matrix GgufFile::read_q8(const GgufTensorInfo& info) const {
  STOA_CHECK(info.type == GgmlType::kQ8_0, ErrorKind::kInvalidArgument, source_, ": tensor '",
             info.name, "' is ", gguf::ggml_type_name(info.type), ", not Q8_0");
  Int8Matrix m;
  m.cols = info.ne[0];
  m.rows = info.numel() / m.cols;
  m.values.resize(static_cast<size_t>(info.numel()));
  m.scales.resize(static_cast<size_t>(info.numel() / gguf::kQ8BlockValues));
  const uint8_t* src = tensor_bytes(info).data();
  for (size_t b = 0; b < m.scales.size(); ++b) {
    const uint8_t* block = src + b * gguf::kQ8BlockBytes;
    std::memcpy(&m.scales[b], block, 2);
    std::memcpy(m.values.data() + b * gguf::kQ8BlockValues, block + 2, gguf::kQ8BlockValues);
    float d = f16_to_f32(m.scales[b]);
    STOA_CHECK(std::isfinite(d), ErrorKind::kBadFormat, source_, ": Q8_0 tensor '", info.name,
               "' block ", b, " has a non-finite scale");
  }
  return m;
}

void GgufFile::release_pages(const GgufTensorInfo& info) const {
  if (storage_->map == nullptr) return;  // bytes held in memory: nothing to hand back
  release_mapped_pages(base_ + data_start_ + info.offset, info.nbytes);
}

}  // namespace stoa
