// TensorSource and its in-process kinds: random init, weights in memory, a Hugging Face
// directory (the GGUF source is in gguf_source.cpp).
#include "model/tensor_source.h"

#include <cstring>
#include <filesystem>
#include <set>

#include "core/error.h"
#include "model/arch_registry.h"

namespace stoa {

TensorSource::TensorSource(ModelConfig config, std::string description)
    : config_(std::move(config)),
      specs_(expected_tensors(config_)),
      description_(std::move(description)) {}

const TensorSpec& TensorSource::spec(const std::string& name) const {
  for (const TensorSpec& s : specs_)
    if (s.name == name) return s;
  fail(ErrorKind::kNotFound, description_, ": no tensor '", name, "' in this ",
       arch_name(config_.arch), " model");
}

std::optional<Int8Matrix> TensorSource::int8(const TensorSpec&) const {
  return std::nullopt;
}

namespace {

ModelConfig validated(const ModelConfig& config) {
  validate_model_config(config, "random init config");
  return config;
}

bool ends_with(const std::string& text, const char* suffix) {
  size_t n = std::strlen(suffix);
  return text.size() >= n && text.compare(text.size() - n, n, suffix) == 0;
}

// Extras real checkpoints carry that carry no information for us.
bool ignorable_extra(const ModelConfig& config, const std::string& name) {
  if (ends_with(name, ".rotary_emb.inv_freq")) return true;  // recomputed from rope_theta
  // Some tied checkpoints also store the (identical) head.
  return config.tie_word_embeddings && name == "lm_head.weight";
}

std::string list_some(const std::vector<std::string>& names) {
  std::string out;
  for (size_t i = 0; i < names.size() && i < 5; ++i) out += (i ? ", " : "") + names[i];
  if (names.size() > 5) out += cat(", ... (", names.size(), " in all)");
  return out;
}

ModelConfig dir_config(const std::string& dir) {
  namespace fs = std::filesystem;
  if (!fs::is_directory(dir)) fail(ErrorKind::kNotFound, dir, ": not a model directory");
  return load_model_config((fs::path(dir) / "config.json").string());
}

}  // namespace

RandomTensorSource::RandomTensorSource(const ModelConfig& config, uint64_t seed, float std)
    : TensorSource(validated(config), cat("random init (seed ", seed, ")")),
      seed_(seed),
      std_(std) {}

Tensor RandomTensorSource::f32(const TensorSpec& spec) const {
  return random_tensor(spec, seed_, std_);
}

WeightsTensorSource::WeightsTensorSource(const ModelWeights& weights)
    : TensorSource(weights.config, "weights in memory"), weights_(weights) {}

Tensor WeightsTensorSource::f32(const TensorSpec& spec) const {
  const Tensor& t = weights_.at(spec.name);
  STOA_CHECK(t.shape() == spec.shape, ErrorKind::kInvalidArgument, "tensor '", spec.name,
             "' has shape ", shape_string(t.shape()), ", the config implies ",
             shape_string(spec.shape));
  if (t.dtype() == DType::kF32) return t.clone();
  STOA_CHECK(t.dtype() == DType::kBF16 || t.dtype() == DType::kF16, ErrorKind::kInvalidArgument,
             "tensor '", spec.name, "' is ", dtype_name(t.dtype()), ", expected a float type");
  return to_f32(t.view());
}

ModelDirTensorSource::ModelDirTensorSource(const std::string& dir)
    : ModelDirTensorSource(dir_config(dir), dir) {}

ModelDirTensorSource::ModelDirTensorSource(ModelConfig config_in, const std::string& dir)
    : TensorSource(std::move(config_in), dir), set_(SafetensorsSet::open_dir(dir)) {
  const ModelConfig& cfg = config();
  std::map<std::string, std::string>& by_ours = file_name_;
  std::vector<std::string> unexpected;
  for (const std::string& name : set_.names()) {
    std::string ours = canonical_tensor_name(cfg, name);
    if (!by_ours.emplace(ours, name).second) {
      fail(ErrorKind::kBadFormat, set_.description(), ": tensors '", by_ours[ours], "' and '", name,
           "' are the same tensor under two spellings");
    }
  }
  std::set<std::string> expected_names;
  std::vector<std::string> missing;
  for (const TensorSpec& s : specs()) {
    expected_names.insert(s.name);
    if (!by_ours.count(s.name)) missing.push_back(s.name);
  }
  for (const auto& [ours, theirs] : by_ours) {
    if (!expected_names.count(ours) && !ignorable_extra(cfg, ours)) unexpected.push_back(theirs);
  }
  if (!missing.empty()) {
    fail(ErrorKind::kBadFormat, set_.description(), ": missing tensors for this ",
         arch_name(cfg.arch), " config: ", list_some(missing));
  }
  if (!unexpected.empty()) {
    fail(ErrorKind::kBadFormat, set_.description(), ": tensors the ", arch_name(cfg.arch),
         " config does not have: ", list_some(unexpected));
  }
  for (const TensorSpec& s : specs()) {
    const std::string& file_name = by_ours.at(s.name);
    const SafetensorsFile& file = set_.file_of(file_name);
    const SafetensorsEntry* entry = file.find(file_name);
    if (entry->shape != s.shape) {
      fail(ErrorKind::kBadFormat, file.source(), ": tensor '", file_name, "' (at byte ",
           entry->offset, ") has shape ", shape_string(entry->shape), " but the config implies ",
           shape_string(s.shape));
    }
    if (entry->dtype != DType::kF32 && entry->dtype != DType::kBF16 &&
        entry->dtype != DType::kF16) {
      fail(ErrorKind::kUnsupported, file.source(), ": tensor '", file_name, "' is ",
           dtype_name(entry->dtype), "; model weights must be f32, bf16 or f16");
    }
  }
}

Tensor ModelDirTensorSource::f32(const TensorSpec& spec) const {
  const std::string& file_name = file_name_.at(spec.name);
  const SafetensorsFile& file = set_.file_of(file_name);
  // Views into the mapping may be unaligned in files from other writers: convert from an
  // aligned copy then (the conversion reads whole elements).
  Tensor out = file.is_aligned(file_name) ? to_f32(file.view(file_name))
                                          : to_f32(file.load(file_name).view());
  file.release_pages(file_name);
  return out;
}

}  // namespace stoa
