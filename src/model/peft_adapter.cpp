// PEFT's adapter directory (peft_adapter.h): written from and read into our adapters' tensors,
// whose names are PEFT's less the "base_model.model." prefix.
#include "model/peft_adapter.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "model/safetensors.h"

namespace stoa {
namespace fs = std::filesystem;
namespace {

constexpr const char* kLoraA = ".lora_A.weight";
constexpr const char* kLoraB = ".lora_B.weight";
constexpr const char* kHashKey = "stoa.base_hash";
constexpr const char* kHashDtypeKey = "stoa.base_hash_dtype";

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

nlohmann::json read_json(const fs::path& path) {
  STOA_CHECK(fs::is_regular_file(path), ErrorKind::kNotFound, "PEFT adapter file ", path.string(),
             " does not exist");
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  nlohmann::json json = nlohmann::json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  STOA_CHECK(json.is_object(), ErrorKind::kBadFormat, path.string(),
             " is not a JSON object (a PEFT adapter_config.json)");
  return json;
}

template <typename T>
T required(const nlohmann::json& config, const char* key, const std::string& path) {
  STOA_CHECK(config.contains(key), ErrorKind::kBadFormat, path, " lacks \"", key, "\"");
  try {
    return config.at(key).get<T>();
  } catch (const nlohmann::json::exception&) {
    fail(ErrorKind::kBadFormat, path, ": \"", key, "\" has the wrong type (", config.at(key).dump(),
         ")");
  }
}

// A feature our adapters do not compute must be absent, null, false or empty.
void refuse_feature(const nlohmann::json& config, const char* key, const std::string& path) {
  if (!config.contains(key)) return;
  const nlohmann::json& v = config.at(key);
  const bool off = v.is_null() || (v.is_boolean() && !v.get<bool>()) ||
                   (v.is_object() && v.empty()) || (v.is_array() && v.empty());
  STOA_CHECK(off, ErrorKind::kUnsupported, path, ": \"", key, "\" = ", v.dump(),
             " is a PEFT feature Stoa's LoRA does not compute (plain LoRA only)");
}

}  // namespace

std::string peft_module_of(const std::string& name) {
  for (const std::string suffix : {kLoraA, kLoraB})
    if (ends_with(name, suffix) && name.size() > suffix.size())
      return name.substr(0, name.size() - suffix.size());
  return "";
}

void write_peft_adapter(const std::string& dir, const PeftAdapter& adapter) {
  STOA_CHECK(adapter.rank >= 1 && adapter.alpha > 0, ErrorKind::kInvalidArgument,
             "a LoRA adapter needs r >= 1 and lora_alpha > 0 (got ", adapter.rank, ", ",
             adapter.alpha, ")");
  std::vector<NamedView> views;
  for (const auto& [name, tensor] : adapter.tensors) {
    STOA_CHECK(!peft_module_of(name).empty() && tensor.dtype() == DType::kF32,
               ErrorKind::kInvalidArgument, "tensor ", name,
               " is not an f32 LoRA adapter matrix (<module>.lora_A.weight or .lora_B.weight)");
    views.emplace_back(kPeftTensorPrefix + name, tensor.view());
  }
  const fs::path out(dir);
  std::error_code ec;
  STOA_CHECK(!fs::exists(out) || (fs::is_directory(out) && fs::is_empty(out)),
             ErrorKind::kInvalidArgument, "PEFT adapter directory ", dir,
             " exists and is not empty");
  const fs::path tmp = dir + ".tmp";
  fs::remove_all(tmp, ec);
  fs::create_directories(tmp, ec);
  STOA_CHECK(!ec, ErrorKind::kIo, "cannot create ", tmp.string(), ": ", ec.message());
  const nlohmann::json peft = {{"peft_type", "LORA"},
                               {"task_type", "CAUSAL_LM"},
                               {"base_model_name_or_path", adapter.base_model},
                               {"r", adapter.rank},
                               {"lora_alpha", adapter.alpha},
                               {"lora_dropout", adapter.dropout},
                               {"target_modules", adapter.target_modules},
                               {"bias", "none"},
                               {"fan_in_fan_out", false},
                               {"inference_mode", true},
                               {"init_lora_weights", true},
                               {"use_rslora", false},
                               {"use_dora", false},
                               {"modules_to_save", nullptr},
                               {"layers_to_transform", nullptr},
                               {"rank_pattern", nlohmann::json::object()},
                               {"alpha_pattern", nlohmann::json::object()},
                               {"revision", nullptr}};
  {
    std::ofstream file(tmp / kPeftConfigFile, std::ios::binary);
    file << peft.dump(2) << "\n";
    STOA_CHECK(file.good(), ErrorKind::kIo, "cannot write ", (tmp / kPeftConfigFile).string());
  }
  std::map<std::string, std::string> metadata = {{"format", "pt"}};
  if (!adapter.base_hash.empty()) {
    metadata[kHashKey] = adapter.base_hash;
    metadata[kHashDtypeKey] = adapter.base_hash_dtype;
  }
  write_safetensors((tmp / kPeftWeightsFile).string(), views, metadata);
  if (fs::exists(out)) fs::remove(out, ec);  // empty: checked above
  fs::rename(tmp, out, ec);
  STOA_CHECK(!ec, ErrorKind::kIo, "cannot move ", tmp.string(), " to ", dir, ": ", ec.message());
}

PeftAdapter read_peft_adapter(const std::string& dir) {
  const fs::path root(dir);
  STOA_CHECK(fs::is_directory(root), ErrorKind::kNotFound, "PEFT adapter directory ", dir,
             " does not exist");
  const std::string config_path = (root / kPeftConfigFile).string();
  const nlohmann::json config = read_json(config_path);
  const std::string type = required<std::string>(config, "peft_type", config_path);
  STOA_CHECK(type == "LORA", ErrorKind::kUnsupported, config_path, ": peft_type is \"", type,
             "\"; only LORA adapters are read");
  for (const char* key : {"use_dora", "use_rslora", "rank_pattern", "alpha_pattern",
                          "modules_to_save", "fan_in_fan_out", "layers_to_transform"})
    refuse_feature(config, key, config_path);
  if (config.contains("bias")) {
    STOA_CHECK(config.at("bias") == "none", ErrorKind::kUnsupported, config_path, ": bias is ",
               config.at("bias").dump(), "; only adapters without trained biases are read");
  }
  PeftAdapter adapter;
  adapter.rank = required<int64_t>(config, "r", config_path);
  adapter.alpha = required<double>(config, "lora_alpha", config_path);
  adapter.dropout = config.contains("lora_dropout") && !config.at("lora_dropout").is_null()
                        ? required<double>(config, "lora_dropout", config_path)
                        : 0.0;
  const nlohmann::json& targets =
      config.contains("target_modules") ? config.at("target_modules") : nlohmann::json();
  if (targets.is_string()) {
    adapter.target_modules = {targets.get<std::string>()};
  } else {
    adapter.target_modules =
        required<std::vector<std::string>>(config, "target_modules", config_path);
  }
  if (config.contains("base_model_name_or_path") &&
      config.at("base_model_name_or_path").is_string())
    adapter.base_model = config.at("base_model_name_or_path").get<std::string>();
  STOA_CHECK(adapter.rank >= 1, ErrorKind::kBadFormat, config_path, ": r must be >= 1 (got ",
             adapter.rank, ")");
  STOA_CHECK(std::isfinite(adapter.alpha) && adapter.alpha > 0, ErrorKind::kBadFormat, config_path,
             ": lora_alpha must be finite and > 0 (got ", adapter.alpha, ")");
  STOA_CHECK(adapter.dropout >= 0 && adapter.dropout < 1, ErrorKind::kBadFormat, config_path,
             ": lora_dropout must lie in [0, 1) (got ", adapter.dropout, ")");

  const std::string weights_path = (root / kPeftWeightsFile).string();
  STOA_CHECK(fs::is_regular_file(weights_path), ErrorKind::kNotFound, "PEFT adapter file ",
             weights_path, " does not exist (adapter_model.bin, a pickle, is not read)");
  const SafetensorsFile file = SafetensorsFile::open(weights_path);
  const std::string prefix = kPeftTensorPrefix;
  for (const SafetensorsEntry& entry : file.entries()) {
    STOA_CHECK(entry.name.rfind(prefix, 0) == 0 && !peft_module_of(entry.name).empty(),
               ErrorKind::kBadFormat, weights_path, ": tensor ", entry.name,
               " is not a LoRA weight (", prefix, "<module>.lora_A.weight / .lora_B.weight)");
    STOA_CHECK(
        entry.dtype == DType::kF32 || entry.dtype == DType::kBF16 || entry.dtype == DType::kF16,
        ErrorKind::kBadFormat, weights_path, ": tensor ", entry.name, " is ",
        dtype_name(entry.dtype), "; LoRA weights are f32, bf16 or f16");
    STOA_CHECK(entry.shape.size() == 2, ErrorKind::kBadFormat, weights_path, ": tensor ",
               entry.name, " is ", shape_string(entry.shape), ", not a matrix");
    Tensor loaded = file.load(entry.name);
    if (loaded.dtype() != DType::kF32) loaded = to_f32(loaded.view());
    adapter.tensors.emplace(entry.name.substr(prefix.size()), std::move(loaded));
  }
  STOA_CHECK(!adapter.tensors.empty(), ErrorKind::kBadFormat, weights_path, " holds no tensors");
  // Every module: A [r, in] and B [out, r], the r of adapter_config.json.
  for (const auto& [name, tensor] : adapter.tensors) {
    const std::string module = peft_module_of(name);
    const bool is_a = name == module + kLoraA;
    const std::string partner = module + (is_a ? kLoraB : kLoraA);
    STOA_CHECK(adapter.tensors.count(partner), ErrorKind::kBadFormat, weights_path, ": ",
               prefix + name, " has no ", prefix + partner);
    const int64_t r = is_a ? tensor.shape()[0] : tensor.shape()[1];
    STOA_CHECK(r == adapter.rank, ErrorKind::kBadFormat, weights_path, ": ", prefix + name, " is ",
               shape_string(tensor.shape()), ", not of rank r = ", adapter.rank, " (", config_path,
               ")");
  }
  const auto& metadata = file.metadata();
  if (auto hash = metadata.find(kHashKey); hash != metadata.end()) {
    adapter.base_hash = hash->second;
    auto dtype = metadata.find(kHashDtypeKey);
    if (dtype != metadata.end()) adapter.base_hash_dtype = dtype->second;
  }
  return adapter;
}

}  // namespace stoa
