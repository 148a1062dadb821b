// Generic half of config handling: JSON in and out, model_type dispatch through the registry,
// and the checks every architecture shares. The per-architecture fields live in arch_*.cpp.
#include "model/config.h"

#include <cmath>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/file_bytes.h"
#include "model/arch_registry.h"
#include "model/config_json.h"

namespace stoa {

namespace {

constexpr const char* kByteTokensKey = "stoa_tokenizer";  // ModelConfig::byte_tokens

std::string supported_list() {
  std::string out;
  for (const ArchInfo* info : all_archs()) {
    if (!out.empty()) out += ", ";
    out += info->name;
  }
  return out;
}

void check_range(const std::string& source, const char* field, int64_t value, int64_t lo,
                 int64_t hi) {
  if (value < lo || value > hi) {
    fail(ErrorKind::kBadFormat, source, ": field '", field, "' must be in [", lo, ", ", hi,
         "], got ", value);
  }
}

void check_token(const std::string& source, const char* field, int64_t id, int64_t vocab) {
  if (id >= vocab) {
    fail(ErrorKind::kBadFormat, source, ": field '", field, "' = ", id,
         " is outside the vocabulary (vocab_size ", vocab, ")");
  }
}

}  // namespace

ModelConfig parse_model_config(const std::string& json_text, const std::string& source) {
  nlohmann::json root;
  try {
    root = nlohmann::json::parse(json_text);
  } catch (const nlohmann::json::exception& e) {
    fail(ErrorKind::kBadFormat, source, ": not valid JSON: ", e.what());
  }
  if (!root.is_object()) fail(ErrorKind::kBadFormat, source, ": expected a JSON object");
  ConfigReader reader(root, source);
  if (!reader.has({"model_type"}))
    fail(ErrorKind::kBadFormat, source, ": missing field 'model_type'");
  std::string model_type = reader.get_string({"model_type"}, "");
  const ArchInfo* info = find_arch(model_type);
  if (!info) {
    fail(ErrorKind::kUnsupported, source, ": model_type '", model_type,
         "' is not supported (supported: ", supported_list(), ")");
  }
  ModelConfig config;
  config.arch = info->arch;
  try {
    info->parse(reader, &config);
  } catch (const nlohmann::json::exception& e) {
    // The readers check types first; this catches whatever slipped through, still named.
    fail(ErrorKind::kBadFormat, source, ": ", e.what());
  }
  if (root.contains(kByteTokensKey)) {
    STOA_CHECK(root[kByteTokensKey] == "bytes", ErrorKind::kBadFormat, source, ": field '",
               kByteTokensKey, "' must be \"bytes\" (the only tokenizer a config can name)");
    config.byte_tokens = true;
  }
  validate_model_config(config, source);
  return config;
}

ModelConfig load_model_config(const std::string& path) {
  return parse_model_config(read_text_file(path, "config file"), path);
}

nlohmann::json model_config_to_json(const ModelConfig& config) {
  const ArchInfo& info = arch_info(config.arch);
  nlohmann::json out = nlohmann::json::object();
  out["architectures"] = nlohmann::json::array({info.hf_class});
  out["model_type"] = info.name;
  auto token = [](int64_t id) { return id < 0 ? nlohmann::json(nullptr) : nlohmann::json(id); };
  out["bos_token_id"] = token(config.bos_token_id);
  out["eos_token_id"] = token(config.eos_token_id);
  out["pad_token_id"] = token(config.pad_token_id);
  out["initializer_range"] = 0.02;
  out["use_cache"] = true;
  info.to_json(config, &out);
  if (config.byte_tokens) out[kByteTokensKey] = "bytes";
  return out;
}

void validate_model_config(const ModelConfig& config, const std::string& source) {
  const ArchInfo& info = arch_info(config.arch);
  check_range(source, "vocab_size", config.vocab_size, 1, kMaxModelDim);
  check_range(source, "hidden_size", config.hidden_size, 1, kMaxModelDim);
  check_range(source, "intermediate_size", config.intermediate_size, 1, kMaxModelDim);
  check_range(source, "num_hidden_layers", config.num_layers, 1, kMaxLayers);
  check_range(source, "num_attention_heads", config.num_heads, 1, kMaxHeadCount);
  check_range(source, "num_key_value_heads", config.num_kv_heads, 1, kMaxHeadCount);
  check_range(source, "head_dim", config.head_dim, 2, kMaxHeadCount);
  check_range(source, "max_position_embeddings", config.max_position_embeddings, 1,
              int64_t{1} << 40);
  if (config.num_heads % config.num_kv_heads != 0) {
    fail(ErrorKind::kBadFormat, source, ": num_attention_heads (", config.num_heads,
         ") is not a multiple of num_key_value_heads (", config.num_kv_heads, ")");
  }
  if (config.head_dim % 2 != 0) {
    fail(ErrorKind::kBadFormat, source, ": head_dim ", config.head_dim,
         " is odd (rotate-half RoPE needs an even head_dim)");
  }
  if (static_cast<int64_t>(config.layer_kinds.size()) != config.num_layers) {
    fail(ErrorKind::kBadFormat, source, ": layer_types has ", config.layer_kinds.size(),
         " entries but num_hidden_layers is ", config.num_layers);
  }
  if (!(config.rms_norm_eps > 0) || !std::isfinite(config.rms_norm_eps)) {
    fail(ErrorKind::kBadFormat, source, ": the RMSNorm epsilon must be positive and finite, got ",
         config.rms_norm_eps);
  }
  if (!(config.rope_theta > 0) || !std::isfinite(config.rope_theta)) {
    fail(ErrorKind::kBadFormat, source, ": rope_theta must be positive and finite, got ",
         config.rope_theta);
  }
  check_token(source, "bos_token_id", config.bos_token_id, config.vocab_size);
  check_token(source, "eos_token_id", config.eos_token_id, config.vocab_size);
  check_token(source, "pad_token_id", config.pad_token_id, config.vocab_size);
  if (config.byte_tokens && config.vocab_size < 256) {
    fail(ErrorKind::kBadFormat, source, ": '", kByteTokensKey, "' is \"bytes\" but vocab_size ",
         config.vocab_size, " cannot hold the 256 byte ids");
  }
  info.validate(config, source);
  try {
    count_parameters(config);  // throws if the total overflows int64
  } catch (const Error& e) {
    fail(ErrorKind::kBadFormat, source, ": ", e.what());
  }
}

}  // namespace stoa
