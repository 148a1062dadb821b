// safetensors: read (mmap, zero-copy views) and write. Format: an 8-byte little-endian header
// length N, N bytes of JSON {"name": {"dtype", "shape", "data_offsets": [begin, end]}, ...,
// "__metadata__": {string: string}}, then the data; offsets are relative to the data start.
//
// Reading trusts nothing: every length, offset, shape and dtype is checked, and each failure is
// a stoa::Error (kBadFormat, or kUnsupported for a valid dtype we do not handle) that names the
// file and the tensor. Following the reference implementation, the tensors must tile the data
// section exactly: no overlaps, no gaps, no trailing bytes.
//
// Writing orders the data by dtype size (largest first), then name, and pads the header with
// spaces to a multiple of 8 — so every tensor starts aligned to its element size, as with the
// Rust/Python `safetensors` writer.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"

namespace stoa {

struct SafetensorsEntry {
  std::string name;
  DType dtype = DType::kF32;
  Shape shape;
  uint64_t offset = 0;  // from the start of the file
  uint64_t nbytes = 0;
};

class SafetensorsFile {
 public:
  // Maps the file read-only from disk's point of view (private copy-on-write pages, so a
  // stray write through a view can neither crash nor change the file).
  static SafetensorsFile open(const std::string& path);
  // Parses an in-memory image (a received blob, or a test's corrupted copy); `source` names it.
  static SafetensorsFile from_bytes(std::vector<uint8_t> bytes, const std::string& source);

  SafetensorsFile(SafetensorsFile&&) noexcept;
  SafetensorsFile& operator=(SafetensorsFile&&) noexcept;
  ~SafetensorsFile();

  const std::string& source() const { return source_; }
  const std::vector<SafetensorsEntry>& entries() const { return entries_; }  // sorted by name
  const SafetensorsEntry* find(const std::string& name) const;
  bool has(const std::string& name) const { return find(name) != nullptr; }
  // Zero-copy view into the file, valid while this object lives. The data is aligned to its
  // element size when the writer followed the convention above (ours and HF's do); use load()
  // when that cannot be assumed. Throws kNotFound naming the tensor and file.
  TensorView view(const std::string& name) const;
  bool is_aligned(const std::string& name) const;
  // An owning, 64-byte aligned copy.
  Tensor load(const std::string& name) const;
  // Hands the tensor's mapped pages back (views of it read the file again): streaming readers
  // call it after each tensor so a whole checkpoint never stays resident.
  void release_pages(const std::string& name) const;
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

 private:
  SafetensorsFile() = default;
  void parse();

  std::string source_;
  const uint8_t* data_ = nullptr;  // the whole file
  size_t size_ = 0;
  void* mapping_ = nullptr;  // munmap on destruction when set
  std::vector<uint8_t> owned_;
  std::vector<SafetensorsEntry> entries_;
  std::map<std::string, std::string> metadata_;
};

using NamedView = std::pair<std::string, TensorView>;

// Writes atomically (a temporary file renamed into place). Views must be contiguous; names
// unique and non-empty. Throws kIo naming the path.
void write_safetensors(const std::string& path, const std::vector<NamedView>& tensors,
                       const std::map<std::string, std::string>& metadata = {});
// Streamed: the header is planned from names, dtypes and shapes, then `produce` is asked for
// each tensor in file order and its bytes written before the next is made, so only one tensor
// is in memory at a time. Same layout and atomicity as write_safetensors; a producer that
// throws leaves no file behind.
struct SafetensorsPlanned {
  std::string name;
  DType dtype = DType::kF32;
  Shape shape;
};
using SafetensorsProducer = std::function<Tensor(const SafetensorsPlanned&)>;
void write_safetensors_streamed(const std::string& path,
                                const std::vector<SafetensorsPlanned>& tensors,
                                const std::map<std::string, std::string>& metadata,
                                const SafetensorsProducer& produce);
// The same bytes, in memory.
std::vector<uint8_t> serialize_safetensors(const std::vector<NamedView>& tensors,
                                           const std::map<std::string, std::string>& metadata = {});

// The weights of a model directory: `model.safetensors.index.json` (sharded: weight_map names
// the file of every tensor) when present, else `model.safetensors`.
class SafetensorsSet {
 public:
  static SafetensorsSet open_dir(const std::string& dir);

  std::vector<std::string> names() const;  // sorted
  const SafetensorsEntry* find(const std::string& name) const;
  const SafetensorsFile& file_of(const std::string& name) const;  // kNotFound if absent
  TensorView view(const std::string& name) const { return file_of(name).view(name); }
  Tensor load(const std::string& name) const { return file_of(name).load(name); }
  const std::string& description() const { return description_; }  // for error messages

 private:
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::map<std::string, size_t> file_index_;  // tensor name -> files_ index
  std::string description_;
};

}  // namespace stoa
