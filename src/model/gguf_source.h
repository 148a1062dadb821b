// A GGUF file as a TensorSource: the tensors of a file written by export_gguf (or llama.cpp's
// converter, for the three architectures) under their HF names, experts split out of their
// stacks, decoded one at a time from the mapping (whose pages are handed back after each).
// Q8_0 tensors are also available verbatim on the int8 grid (int8()), so an int8 consumer (the
// engine, a Q8_0 re-export) never widens them.
#pragma once
#include <map>
#include <memory>
#include <string>

#include "model/gguf_reader.h"
#include "model/tensor_source.h"

namespace stoa {

class GgufTensorSource : public TensorSource {
 public:
  // Checks the file against the config its metadata implies: every tensor present with its
  // shape, no tensor Stoa does not know (kBadFormat / kUnsupported naming file and tensor).
  explicit GgufTensorSource(GgufFile file);
  explicit GgufTensorSource(const std::string& path) : GgufTensorSource(GgufFile::open(path)) {}

  const GgufFile& file() const { return file_; }
  // Non-finite values fail with kBadFormat naming the file, the tensor and the byte offset.
  Tensor f32(const TensorSpec& spec) const override;
  std::optional<Int8Matrix> int8(const TensorSpec& spec) const override;

 private:
  GgufTensorSource(GgufFile file, ModelConfig config);
  struct Slice {
    size_t tensor = 0;  // index into file_.tensors()
    int64_t first = 0;  // first element of this source tensor in the GGUF tensor
    int64_t count = 0;
  };
  GgufFile file_;
  std::map<std::string, Slice> slices_;  // HF name -> where its values are
};

// A model directory's weights as a source: model.gguf for an int8-sized directory (`stoa model
// init --dtype q8_0`), else the safetensors (one file or shards with an index).
std::unique_ptr<TensorSource> open_model_dir_source(const std::string& dir);

}  // namespace stoa
