// Hugging Face model directories: config.json + model.safetensors (or shards with an index).
// Loading checks the tensors against the config's expected list, so a checkpoint of another
// size or architecture fails here with the tensor named, not later as a wrong answer.
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "model/arch_registry.h"
#include "model/safetensors.h"
#include "model/weights.h"

namespace stoa {

namespace {

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

}  // namespace

ModelWeights load_model_dir(const std::string& dir) {
  namespace fs = std::filesystem;
  if (!fs::is_directory(dir)) fail(ErrorKind::kNotFound, dir, ": not a model directory");
  ModelWeights weights;
  weights.config = load_model_config((fs::path(dir) / "config.json").string());
  const ModelConfig& config = weights.config;
  SafetensorsSet set = SafetensorsSet::open_dir(dir);

  std::map<std::string, std::string> by_ours;  // our name -> name in the file
  std::vector<std::string> unexpected;
  for (const std::string& name : set.names()) {
    std::string ours = canonical_tensor_name(config, name);
    if (!by_ours.emplace(ours, name).second) {
      fail(ErrorKind::kBadFormat, set.description(), ": tensors '", by_ours[ours], "' and '", name,
           "' are the same tensor under two spellings");
    }
  }
  std::vector<TensorSpec> specs = expected_tensors(config);
  std::set<std::string> expected_names;
  std::vector<std::string> missing;
  for (const TensorSpec& spec : specs) {
    expected_names.insert(spec.name);
    if (!by_ours.count(spec.name)) missing.push_back(spec.name);
  }
  for (const auto& [ours, theirs] : by_ours) {
    if (!expected_names.count(ours) && !ignorable_extra(config, ours)) unexpected.push_back(theirs);
  }
  if (!missing.empty()) {
    fail(ErrorKind::kBadFormat, set.description(), ": missing tensors for this ",
         arch_name(config.arch), " config: ", list_some(missing));
  }
  if (!unexpected.empty()) {
    fail(ErrorKind::kBadFormat, set.description(), ": tensors the ", arch_name(config.arch),
         " config does not have: ", list_some(unexpected));
  }

  for (const TensorSpec& spec : specs) {
    const std::string& file_name = by_ours[spec.name];
    const SafetensorsFile& file = set.file_of(file_name);
    const SafetensorsEntry* entry = file.find(file_name);
    if (entry->shape != spec.shape) {
      fail(ErrorKind::kBadFormat, file.source(), ": tensor '", file_name, "' has shape ",
           shape_string(entry->shape), " but the config implies ", shape_string(spec.shape));
    }
    if (entry->dtype != DType::kF32 && entry->dtype != DType::kBF16 &&
        entry->dtype != DType::kF16) {
      fail(ErrorKind::kUnsupported, file.source(), ": tensor '", file_name, "' is ",
           dtype_name(entry->dtype), "; model weights must be f32, bf16 or f16");
    }
    // Views into the mapping may be unaligned in files from other writers: convert from an
    // aligned copy then (the conversion reads whole elements).
    Tensor f32 = file.is_aligned(file_name) ? to_f32(file.view(file_name))
                                            : to_f32(file.load(file_name).view());
    weights.tensors.emplace(spec.name, std::move(f32));
  }
  return weights;
}

void save_model_dir(const ModelWeights& weights, const std::string& dir, DType dtype) {
  namespace fs = std::filesystem;
  STOA_CHECK(dtype == DType::kF32 || dtype == DType::kBF16 || dtype == DType::kF16,
             ErrorKind::kInvalidArgument, "save_model_dir: dtype must be f32, bf16 or f16, not ",
             dtype_name(dtype));
  const ModelConfig& config = weights.config;
  validate_model_config(config, cat(dir, "/config.json (being written)"));
  std::vector<Tensor> converted;
  std::vector<NamedView> views;
  std::vector<TensorSpec> specs = expected_tensors(config);
  converted.reserve(specs.size());
  for (const TensorSpec& spec : specs) {
    const Tensor& t = weights.at(spec.name);
    STOA_CHECK(t.shape() == spec.shape, ErrorKind::kInvalidArgument, "save_model_dir: tensor '",
               spec.name, "' has shape ", shape_string(t.shape()), ", the config implies ",
               shape_string(spec.shape));
    DType target = keeps_f32(config, spec.name) ? DType::kF32 : dtype;
    if (t.dtype() == target) {
      views.emplace_back(spec.name, t.view());
    } else {
      STOA_CHECK(t.dtype() == DType::kF32, ErrorKind::kInvalidArgument, "save_model_dir: tensor '",
                 spec.name, "' is ", dtype_name(t.dtype()), ", expected f32");
      converted.push_back(convert_float(t.view(), target));
      views.emplace_back(spec.name, converted.back().view());
    }
  }
  if (weights.tensors.size() != specs.size()) {
    fail(ErrorKind::kInvalidArgument, "save_model_dir: the weights hold ", weights.tensors.size(),
         " tensors but the config implies ", specs.size());
  }

  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) fail(ErrorKind::kIo, dir, ": cannot create directory: ", ec.message());
  nlohmann::json config_json = model_config_to_json(config);
  config_json["torch_dtype"] = dtype == DType::kF32    ? "float32"
                               : dtype == DType::kBF16 ? "bfloat16"
                                                       : "float16";
  std::string config_path = (fs::path(dir) / "config.json").string();
  {
    std::ofstream out(config_path, std::ios::trunc);
    out << config_json.dump(2) << "\n";
    if (!out) fail(ErrorKind::kIo, config_path, ": write failed");
  }
  // A stale index would make loaders read old shards instead of the new file.
  fs::remove(fs::path(dir) / "model.safetensors.index.json", ec);
  // transformers refuses safetensors files whose metadata lacks format "pt".
  write_safetensors((fs::path(dir) / "model.safetensors").string(), views, {{"format", "pt"}});
}

}  // namespace stoa
