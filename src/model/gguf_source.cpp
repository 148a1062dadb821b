// GgufTensorSource, import_gguf on top of it, and the source of a model directory (GGUF or
// safetensors).
#include "model/gguf_source.h"

#include <cmath>
#include <cstring>
#include <filesystem>

#include "core/dtype.h"
#include "core/error.h"
#include "model/arch_registry.h"
#include "model/gguf_arch_map.h"

namespace stoa {

using gguf::GgmlType;

namespace {

ModelConfig config_of(const GgufFile& file) {
  return config_from_gguf(file.metadata(), file.find_tensor("output.weight") != nullptr,
                          file.source());
}

}  // namespace

GgufTensorSource::GgufTensorSource(GgufFile file) : GgufTensorSource(file, config_of(file)) {}

GgufTensorSource::GgufTensorSource(GgufFile file, ModelConfig config)
    : TensorSource(std::move(config), file.source()), file_(std::move(file)) {
  const std::string& src = file_.source();
  std::map<std::string, size_t> index;
  for (size_t k = 0; k < file_.tensors().size(); ++k) index[file_.tensors()[k].name] = k;
  std::map<std::string, bool> used;
  for (const GgufTensorPlan& p : gguf_tensor_plan(this->config())) {
    auto it = index.find(p.gguf_name);
    STOA_CHECK(it != index.end(), ErrorKind::kBadFormat, src, ": GGUF lacks tensor '", p.gguf_name,
               "' (", p.sources.front(), ")");
    const GgufTensorInfo& info = file_.tensors()[it->second];
    used[p.gguf_name] = true;
    STOA_CHECK(info.shape() == p.shape, ErrorKind::kBadFormat, src, ": GGUF tensor '", p.gguf_name,
               "' has shape ", shape_string(info.shape()), ", the metadata implies ",
               shape_string(p.shape));
    int64_t per_source = info.numel() / static_cast<int64_t>(p.sources.size());
    for (size_t s = 0; s < p.sources.size(); ++s)
      slices_[p.sources[s]] = {it->second, static_cast<int64_t>(s) * per_source, per_source};
  }
  for (const GgufTensorInfo& t : file_.tensors())
    STOA_CHECK(used.count(t.name), ErrorKind::kUnsupported, src, ": GGUF tensor '", t.name,
               "' is not part of Stoa's ", arch_name(this->config().arch));
}

Tensor GgufTensorSource::f32(const TensorSpec& spec) const {
  const Slice& slice = slices_.at(spec.name);
  const GgufTensorInfo& info = file_.tensors()[slice.tensor];
  Tensor out(DType::kF32, spec.shape);
  float* dst = out.as<float>();
  const size_t n = static_cast<size_t>(slice.count);
  const uint8_t* all = file_.tensor_bytes(info).data();
  // Bytes per element (Q8_0: per block) and where this slice starts in the tensor's bytes.
  uint64_t begin = 0;
  switch (info.type) {
    case GgmlType::kF32: {
      begin = static_cast<uint64_t>(slice.first) * 4;
      std::memcpy(dst, all + begin, n * 4);
      break;
    }
    case GgmlType::kF16:
    case GgmlType::kBF16: {
      begin = static_cast<uint64_t>(slice.first) * 2;
      const uint8_t* src = all + begin;
      for (size_t k = 0; k < n; ++k) {
        uint16_t h;
        std::memcpy(&h, src + 2 * k, 2);
        dst[k] = info.type == GgmlType::kF16 ? f16_to_f32(h) : bf16_to_f32(h);
      }
      break;
    }
    case GgmlType::kQ8_0: {
      begin = static_cast<uint64_t>(slice.first / gguf::kQ8BlockValues) * gguf::kQ8BlockBytes;
      const uint8_t* src = all + begin;
      gguf::dequantize_q8_0(src, n / gguf::kQ8BlockValues, dst);
      break;
    }
  }
  for (size_t k = 0; k < n; ++k) {
    if (!std::isfinite(dst[k])) {
      uint64_t at = file_.data_offset() + info.offset + begin +
                    (info.type == GgmlType::kQ8_0 ? k / gguf::kQ8BlockValues * gguf::kQ8BlockBytes
                                                  : k * (info.type == GgmlType::kF32 ? 4 : 2));
      fail(ErrorKind::kBadFormat, file_.source(), ": GGUF tensor '", info.name,
           "' holds a non-finite value at element ", slice.first + static_cast<int64_t>(k),
           " (file offset ", at, ")");
    }
  }
  file_.release_pages(info);
  return out;
}

std::optional<Int8Matrix> GgufTensorSource::int8(const TensorSpec& spec) const {
  const Slice& slice = slices_.at(spec.name);
  const GgufTensorInfo& info = file_.tensors()[slice.tensor];
  if (info.type != GgmlType::kQ8_0) return std::nullopt;
  Int8Matrix m;
  m.cols = info.ne[0];
  m.rows = slice.count / m.cols;
  m.values.resize(static_cast<size_t>(slice.count));
  m.scales.resize(static_cast<size_t>(slice.count / gguf::kQ8BlockValues));
  uint64_t begin = static_cast<uint64_t>(slice.first / gguf::kQ8BlockValues) * gguf::kQ8BlockBytes;
  const uint8_t* src = file_.tensor_bytes(info).data() + begin;
  for (size_t b = 0; b < m.scales.size(); ++b) {
    const uint8_t* block = src + b * gguf::kQ8BlockBytes;
    std::memcpy(&m.scales[b], block, 2);
    std::memcpy(m.values.data() + b * gguf::kQ8BlockValues, block + 2, gguf::kQ8BlockValues);
    STOA_CHECK(std::isfinite(f16_to_f32(m.scales[b])), ErrorKind::kBadFormat, file_.source(),
               ": Q8_0 tensor '", info.name, "' block ",
               static_cast<uint64_t>(slice.first / gguf::kQ8BlockValues) + b,
               " has a non-finite scale (file offset ",
               file_.data_offset() + info.offset + begin + b * gguf::kQ8BlockBytes, ")");
  }
  file_.release_pages(info);
  return m;
}

ModelWeights import_gguf(const GgufFile& file, std::map<std::string, Int8Matrix>* int8) {
  GgufTensorSource source(file);
  ModelWeights weights;
  weights.config = source.config();
  for (const TensorSpec& spec : source.specs()) {
    weights.tensors.emplace(spec.name, source.f32(spec));
    if (int8) {
      if (std::optional<Int8Matrix> m = source.int8(spec)) (*int8)[spec.name] = std::move(*m);
    }
  }
  return weights;
}

ModelWeights import_gguf(const std::string& path, std::map<std::string, Int8Matrix>* int8) {
  return import_gguf(GgufFile::open(path), int8);
}

std::unique_ptr<TensorSource> open_model_dir_source(const std::string& dir) {
  namespace fs = std::filesystem;
  const fs::path gguf = fs::path(dir) / kModelGgufName;
  if (!fs::exists(fs::path(dir) / "model.safetensors") &&
      !fs::exists(fs::path(dir) / "model.safetensors.index.json") && fs::exists(gguf)) {
    return std::make_unique<GgufTensorSource>(gguf.string());
  }
  return std::make_unique<ModelDirTensorSource>(dir);
}

}  // namespace stoa
