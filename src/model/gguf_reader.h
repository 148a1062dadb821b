// GGUF v3 reader: parses the header, metadata and tensor table of a memory-mapped file, checks
// every length, count, type and offset against the file before using it, and imports the
// tensors back into ModelWeights (F32, F16, BF16, Q8_0).
//
// Untrusted input: a truncated or corrupted file gets a stoa::Error (kBadFormat) that names the
// file and what is wrong with it — never a crash, an out-of-bounds read or a huge allocation.
// GGUF carries no checksum, so a flipped bit inside tensor data that still decodes to a finite
// number cannot be detected; non-finite values are rejected on import.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/int8_grid.h"
#include "core/tensor.h"
#include "model/gguf_format.h"
#include "model/weights.h"

namespace stoa {

struct GgufTensorInfo {
  std::string name;
  gguf::GgmlType type = gguf::GgmlType::kF32;
  std::vector<int64_t> ne;  // ggml order: ne[0] innermost
  uint64_t offset = 0;      // from the start of the data section
  uint64_t nbytes = 0;

  Shape shape() const { return Shape(ne.rbegin(), ne.rend()); }  // our order
  int64_t numel() const;
};

class GgufFile {
 public:
  // Maps and parses `path`. kIo if it cannot be opened, kBadFormat if it is not a valid GGUF.
  static GgufFile open(const std::string& path);
  // Parses bytes held in memory; `source` names them in errors (used by the fault tests).
  static GgufFile from_bytes(std::vector<uint8_t> bytes, const std::string& source);

  const std::string& source() const { return source_; }
  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  uint64_t data_offset() const { return data_start_; }  // file offset of the tensor data section
  const std::map<std::string, gguf::Value>& metadata() const { return kv_; }
  const gguf::Value* find_value(const std::string& key) const;
  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }
  const GgufTensorInfo* find_tensor(const std::string& name) const;

  std::span<const uint8_t> tensor_bytes(const GgufTensorInfo& info) const;
  // Any supported type to f32, in our shape order; kBadFormat for non-finite values.
  Tensor read_f32(const GgufTensorInfo& info) const;
  // A Q8_0 tensor as an int8-grid matrix [numel / ne0, ne0].
  Int8Matrix read_q8(const GgufTensorInfo& info) const;
  // Hands the tensor's mapped pages back once read (no-op for bytes held in memory), so a
  // streaming reader never holds the whole file resident.
  void release_pages(const GgufTensorInfo& info) const;

 private:
  struct Storage;
  void parse();

  std::string source_;
  std::shared_ptr<Storage> storage_;
  const uint8_t* base_ = nullptr;
  uint64_t size_ = 0;
  uint32_t version_ = 0;
  uint64_t alignment_ = gguf::kDefaultAlignment;
  uint64_t data_start_ = 0;
  std::map<std::string, gguf::Value> kv_;
  std::vector<GgufTensorInfo> tensors_;
  std::map<std::string, size_t> tensor_index_;
};

// Rebuilds a model from a GGUF written by export_gguf (or by llama.cpp's converter, for the three
// architectures): config from metadata, tensors renamed back to HF names, experts split, every
// shape checked against the config (GgufTensorSource, gguf_source.h, which reads one tensor at a
// time; this builds the trainer's f32 masters from it). Q8_0 tensors are dequantized into the f32
// masters; when `int8` is given it also receives them verbatim on the grid, keyed by HF name.
ModelWeights import_gguf(const GgufFile& file, std::map<std::string, Int8Matrix>* int8 = nullptr);
ModelWeights import_gguf(const std::string& path,
                         std::map<std::string, Int8Matrix>* int8 = nullptr);

}  // namespace stoa
