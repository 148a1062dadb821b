#include "model/arch_registry.h"

#include "core/error.h"

namespace stoa {

const std::vector<const ArchInfo*>& all_archs() {
  // The one list of architectures. Kept explicit (not self-registering) because stoa_model is a
  // static library: an object file that only registers itself would be dropped by the linker.
  static const std::vector<const ArchInfo*> archs = {&qwen3_arch_info(), &lfm2_arch_info(),
                                                     &lfm2_moe_arch_info()};
  return archs;
}

const ArchInfo& arch_info(Arch arch) {
  for (const ArchInfo* info : all_archs()) {
    if (info->arch == arch) return *info;
  }
  fail(ErrorKind::kInternal, "architecture ", static_cast<int>(arch), " has no registry entry");
}

const ArchInfo* find_arch(std::string_view model_type) {
  for (const ArchInfo* info : all_archs()) {
    if (model_type == info->name) return info;
    for (const std::string& alias : info->aliases) {
      if (model_type == alias) return info;
    }
  }
  return nullptr;
}

const ArchInfo* find_arch_by_gguf_name(std::string_view gguf_name) {
  for (const ArchInfo* info : all_archs()) {
    if (gguf_name == info->gguf_name) return info;
  }
  return nullptr;
}

const char* arch_name(Arch arch) {
  return arch_info(arch).name;
}

int64_t count_parameters(const ModelConfig& config) {
  int64_t total = 0;
  for (const TensorSpec& spec : expected_tensors(config)) {
    int64_t numel = 1;
    for (int64_t dim : spec.shape) {
      if (__builtin_mul_overflow(numel, dim, &numel)) {
        fail(ErrorKind::kBadFormat, "tensor ", spec.name, " ", shape_string(spec.shape),
             " has more elements than int64 holds");
      }
    }
    if (__builtin_add_overflow(total, numel, &total)) {
      fail(ErrorKind::kBadFormat, "the ", arch_name(config.arch),
           " config has more parameters than int64 holds");
    }
  }
  return total;
}

int64_t count_active_parameters(const ModelConfig& config) {
  int64_t total = count_parameters(config);
  int64_t moe_layers = 0;
  for (int64_t layer = 0; layer < config.num_layers; ++layer)
    moe_layers += config.is_moe_layer(layer);
  // Each token runs num_experts_per_tok of num_experts SwiGLU experts (3 matrices each).
  int64_t idle = config.num_experts - config.num_experts_per_tok;
  return total - moe_layers * idle * 3 * config.moe_intermediate_size * config.hidden_size;
}

static bool ends_with(const std::string& text, const std::string& suffix) {
  return text.size() >= suffix.size() &&
         text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

bool keeps_f32(const ModelConfig& config, const std::string& name) {
  for (const TensorRoleRow& row : arch_info(config.arch).tensor_roles) {
    if (row.precision == TensorPrecision::kRoutingStoredF32 &&
        tensor_pattern_matches(row.hf_name, name))
      return true;
  }
  return false;
}

std::string canonical_tensor_name(const ModelConfig& config, const std::string& name) {
  for (const auto& [theirs, ours] : arch_info(config.arch).tensor_suffix_aliases) {
    if (ends_with(name, theirs)) return name.substr(0, name.size() - theirs.size()) + ours;
  }
  return name;
}

}  // namespace stoa
