// GGUF v3 writer and the ModelWeights -> GGUF export that llama.cpp loads (qwen3, lfm2, lfm2moe).
//
// Q8_0 export writes Stoa's int8 grid bit for bit (f16 scale + 32 int8 per block): the worker's
// int8 engine and llama.cpp's Q8_0 kernels then compute on identical weights, which is what makes
// llama.cpp usable as an oracle for the int8 path.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/int8_grid.h"
#include "model/gguf_format.h"
#include "model/weights.h"

namespace stoa {

// Low-level writer: metadata in insertion order, tensors in insertion order, each tensor's data at
// an offset aligned to `general.alignment` (32). The file is written to PATH.tmp and renamed, so a
// crash never leaves a half-written GGUF under the final name.
class GgufWriter {
 public:
  void set(const std::string& key, gguf::Value value);  // replaces an existing key in place
  // `ne` is in ggml order (innermost first); `data` must hold exactly the bytes the type implies.
  void add_tensor(std::string name, gguf::GgmlType type, std::vector<int64_t> ne,
                  std::vector<uint8_t> data);
  // The same, with the bytes made by `produce` when write() reaches the tensor and dropped once
  // written: a model is then exported holding one tensor's bytes at a time.
  using Producer = std::function<std::vector<uint8_t>()>;
  void add_tensor_streamed(std::string name, gguf::GgmlType type, std::vector<int64_t> ne,
                           Producer produce);
  // Writes PATH.tmp and renames it; on any failure (a producer's error, a full disk) the
  // temporary file is removed and nothing is left under either name.
  void write(const std::string& path) const;

  size_t tensor_count() const { return tensors_.size(); }

 private:
  struct PendingTensor {
    std::string name;
    gguf::GgmlType type;
    std::vector<int64_t> ne;
    uint64_t nbytes = 0;
    std::vector<uint8_t> data;  // given up front, or
    Producer produce;           // made at write time
  };
  std::vector<std::pair<std::string, gguf::Value>> kv_;
  std::vector<PendingTensor> tensors_;
};

enum class GgufExportType { kF32, kF16, kQ8_0 };
const char* gguf_export_type_name(GgufExportType type);
// "f32", "f16", "q8_0" (case-insensitive); fails with kInvalidArgument naming the value.
GgufExportType parse_gguf_export_type(const std::string& name);

struct GgufExportOptions {
  GgufExportType type = GgufExportType::kF32;
  // Weight matrices already on the int8 grid, keyed by HF tensor name (e.g. the worker's weights
  // with PULSE-frozen scales). Q8_0 export writes these verbatim; other matrices are quantized
  // with fresh scales (int8_quantize), which is what the engine does for a fresh anchor.
  const std::map<std::string, Int8Matrix>* int8 = nullptr;
  std::string model_name;  // general.name; empty = omitted
};

// Exports `weights` in llama.cpp's naming. Which tensors are weight matrices (F16/Q8_0) and which
// stay F32 (norms, the conv kernel, the MoE router and expert bias) is decided by the tensor plan
// (gguf_arch_map.h). Fails with kUnsupported when the config uses a feature llama.cpp cannot
// represent (it would otherwise compute something else without telling).
void export_gguf(const ModelWeights& weights, const std::string& path,
                 const GgufExportOptions& options = {});
// Streamed from any source (random init, a model directory, another GGUF): each GGUF tensor is
// made from its source tensors when the writer reaches it, so at most one source tensor's f32
// copy and one GGUF tensor's bytes are alive at a time. Q8_0 blocks the source already holds
// (TensorSource::int8) are written verbatim.
class TensorSource;
void export_gguf(const TensorSource& source, const std::string& path,
                 const GgufExportOptions& options = {});

}  // namespace stoa
