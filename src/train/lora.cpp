// LoRA targets and shapes (lora.h): the layers' matrices come from the policy layout (by role),
// so a target names the same weights the trainer multiplies by.
#include "train/lora.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "core/error.h"
#include "model/weights.h"
#include "train/models/policy_layout.h"

namespace stoa::train {
namespace {

constexpr const char* kAllLinear = "all-linear";
constexpr const char* kWeightSuffix = ".weight";

// Every matrix a layer multiplies its activations by, except the routers (their top-k choice
// carries no gradient; adapting them would move routing, which the engine computes in f32).
std::vector<std::string> layer_matrices(const ModelConfig& config) {
  std::vector<std::string> out;
  for (const PolicyLayerLayout& l : policy_layout(config).layers) {
    for (const std::string* name :
         {&l.q, &l.k, &l.v, &l.o, &l.conv_in, &l.conv_out, &l.gate, &l.up, &l.down}) {
      if (!name->empty()) out.push_back(*name);
    }
    for (const auto* experts : {&l.expert_gate, &l.expert_up, &l.expert_down})
      out.insert(out.end(), experts->begin(), experts->end());
  }
  return out;
}

std::string module_of(const std::string& weight) {
  const std::string suffix = kWeightSuffix;
  if (weight.size() > suffix.size() &&
      weight.compare(weight.size() - suffix.size(), suffix.size(), suffix) == 0)
    return weight.substr(0, weight.size() - suffix.size());
  return weight;
}

bool module_matches(const std::string& module, const std::string& target) {
  if (module == target) return true;
  return module.size() > target.size() &&
         module.compare(module.size() - target.size(), target.size(), target) == 0 &&
         module[module.size() - target.size() - 1] == '.';
}

}  // namespace

void validate_lora_options(const LoraOptions& o) {
  if (!o.enabled()) {
    STOA_CHECK(o.rank == 0, ErrorKind::kInvalidArgument, "lora rank must be >= 0 (got ", o.rank,
               ")");
    return;
  }
  STOA_CHECK(std::isfinite(o.alpha) && o.alpha > 0, ErrorKind::kInvalidArgument,
             "lora alpha must be finite and > 0 (got ", o.alpha, ")");
  STOA_CHECK(o.dropout >= 0 && o.dropout < 1, ErrorKind::kInvalidArgument,
             "lora dropout must lie in [0, 1) (got ", o.dropout, ")");
  STOA_CHECK(!o.targets.empty(), ErrorKind::kInvalidArgument,
             "lora target_modules is empty (\"all-linear\" targets every layer matrix)");
  STOA_CHECK(o.base_dtype == DType::kBF16 || o.base_dtype == DType::kF32,
             ErrorKind::kInvalidArgument, "lora base dtype must be bf16 or f32 (got ",
             dtype_name(o.base_dtype), ")");
}

std::vector<LoraTarget> lora_targets(const ModelConfig& config, const LoraOptions& options) {
  validate_lora_options(options);
  if (!options.enabled()) return {};
  std::map<std::string, Shape> shapes;
  for (const TensorSpec& spec : expected_tensors(config)) shapes[spec.name] = spec.shape;
  const std::vector<std::string> matrices = layer_matrices(config);
  std::map<std::string, LoraTarget> chosen;  // name order
  for (const std::string& target : options.targets) {
    bool matched = false;
    for (const std::string& weight : matrices) {
      const std::string module = module_of(weight);
      if (target != kAllLinear && !module_matches(module, target)) continue;
      matched = true;
      const Shape& shape = shapes.at(weight);
      STOA_CHECK(shape.size() == 2, ErrorKind::kInternal, "LoRA target ", weight, " is not 2-D");
      chosen[weight] = {weight, module, shape[0], shape[1]};
    }
    STOA_CHECK(matched, ErrorKind::kInvalidArgument, "lora target '", target,
               "' matches no matrix of the ", arch_name(config.arch),
               " layers (module names such as q_proj, w1, in_proj; or all-linear)");
  }
  std::vector<LoraTarget> out;
  for (auto& [name, target] : chosen) out.push_back(std::move(target));
  return out;
}

int64_t lora_adapter_numel(const ModelConfig& config, const LoraOptions& options) {
  int64_t n = 0;
  for (const LoraTarget& t : lora_targets(config, options)) n += t.adapter_numel(options.rank);
  return n;
}

std::string lora_a_name(const LoraTarget& target) {
  return target.module + ".lora_A.weight";
}
std::string lora_b_name(const LoraTarget& target) {
  return target.module + ".lora_B.weight";
}

}  // namespace stoa::train
