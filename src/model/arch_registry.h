// The architecture registry: everything model/ knows about one architecture lives in one entry —
// its names (our Arch, HF model_type and its aliases, the HF class, llama.cpp's name), how its
// config.json reads and writes, its own validity rules, and its tensor-role table (every tensor's
// role, HF name, GGUF name, shape and precision class; tensor_roles.h).
//
// Adding an architecture: add an Arch value (config.h), write arch_<name>.cpp defining an
// ArchInfo, list it in arch_registry.cpp's table. See docs/howto-add-model.md.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "model/config.h"
#include "model/tensor_roles.h"
#include "model/weights.h"

namespace stoa {

class ConfigReader;

struct ArchInfo {
  Arch arch;
  const char* name;                  // canonical HF model_type, e.g. "lfm2_moe"
  std::vector<std::string> aliases;  // other model_type spellings accepted on read
  const char* hf_class;              // "architectures" entry, e.g. "Lfm2MoeForCausalLM"
  const char* gguf_name;             // llama.cpp's general.architecture, e.g. "lfm2moe"
  // Fills the architecture's fields of `config` (the generic reader has set `arch` only).
  void (*parse)(const ConfigReader& reader, ModelConfig* config);
  // Writes the fields HF's config class for this model_type reads, such that parse() of the
  // result gives back the same ModelConfig.
  void (*to_json)(const ModelConfig& config, nlohmann::json* out);
  // Architecture-specific validity (the generic checks in validate_model_config run first).
  void (*validate)(const ModelConfig& config, const std::string& source);
  // Every tensor, one row each, in the order of the tensor list: embeddings, then the layer rows,
  // then final norm, head (tensor_roles.h).
  std::vector<TensorRoleRow> tensor_roles;
  // Checkpoint spellings that load as another name: {suffix in the file, suffix we use}.
  std::vector<std::pair<std::string, std::string>> tensor_suffix_aliases;
};

const std::vector<const ArchInfo*>& all_archs();
const ArchInfo& arch_info(Arch arch);
// nullptr when no entry claims `model_type` (canonical name or alias).
const ArchInfo* find_arch(std::string_view model_type);
// nullptr when no entry has llama.cpp name `gguf_name`.
const ArchInfo* find_arch_by_gguf_name(std::string_view gguf_name);

// Total parameter count (sum of the elements of expected_tensors); fails with kBadFormat on
// int64 overflow. Active parameters count only top-k experts per MoE layer.
int64_t count_parameters(const ModelConfig& config);
int64_t count_active_parameters(const ModelConfig& config);

// True when `name` is saved in f32 whatever the directory dtype (its row's precision class is
// kRoutingStoredF32: a bf16 routing bias would flip expert choices between trainer and worker).
bool keeps_f32(const ModelConfig& config, const std::string& name);
// Maps a checkpoint's spelling to ours (see tensor_suffix_aliases); unchanged otherwise.
std::string canonical_tensor_name(const ModelConfig& config, const std::string& name);

// Entries defined in arch_*.cpp.
const ArchInfo& qwen3_arch_info();
const ArchInfo& lfm2_arch_info();
const ArchInfo& lfm2_moe_arch_info();

}  // namespace stoa
