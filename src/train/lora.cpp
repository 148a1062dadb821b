// LoRA targets and shapes (lora.h): the layers' matrices come from the policy layout (by role),
// so a target names the same weights the trainer multiplies by.
#include "train/lora.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

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
    STOA_CHECK(o.init_adapter.empty(), ErrorKind::kInvalidArgument,
               "a LoRA adapter to start from (", o.init_adapter,
               ") needs a LoRA rank (full fine-tuning has no adapters)");
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

std::vector<std::string> peft_target_modules(const ModelConfig& config,
                                             const LoraOptions& options) {
  std::set<std::string> modules, short_names;
  for (const LoraTarget& t : lora_targets(config, options)) {
    modules.insert(t.module);
    short_names.insert(t.module.substr(t.module.rfind('.') + 1));
  }
  LoraOptions probe = options;
  probe.init_adapter.clear();
  probe.targets.assign(short_names.begin(), short_names.end());
  std::set<std::string> picked;
  for (const LoraTarget& t : lora_targets(config, probe)) picked.insert(t.module);
  if (picked == modules) return probe.targets;
  return {modules.begin(), modules.end()};
}

void check_peft_adapter(const PeftAdapter& adapter, const ModelConfig& config,
                        const LoraOptions& options, const std::string& source) {
  STOA_CHECK(adapter.rank == options.rank, ErrorKind::kInvalidArgument, "LoRA adapter ", source,
             " has rank ", adapter.rank, "; this run's LoRA rank is ", options.rank,
             " (set the run's rank to the adapter's)");
  STOA_CHECK(adapter.alpha == options.alpha, ErrorKind::kInvalidArgument, "LoRA adapter ", source,
             " has lora_alpha ", adapter.alpha, "; this run's alpha is ", options.alpha,
             " (the scale alpha / rank would change the model)");
  const auto names = [](const std::vector<std::string>& list) {
    std::string out;
    for (const std::string& s : list) out += (out.empty() ? "" : ", ") + s;
    return "[" + out + "]";
  };
  std::set<std::string> expected;
  for (const LoraTarget& t : lora_targets(config, options)) {
    for (const auto& [name, shape] : {std::pair{lora_a_name(t), Shape{options.rank, t.in}},
                                      std::pair{lora_b_name(t), Shape{t.out, options.rank}}}) {
      expected.insert(name);
      auto found = adapter.tensors.find(name);
      STOA_CHECK(found != adapter.tensors.end(), ErrorKind::kInvalidArgument, "LoRA adapter ",
                 source, " has no ", name, ", which this run's targets ", names(options.targets),
                 " adapt; the adapter targets ", names(adapter.target_modules));
      STOA_CHECK(found->second.shape() == shape, ErrorKind::kInvalidArgument, "LoRA adapter ",
                 source, ": ", name, " is ", shape_string(found->second.shape()), "; the ",
                 arch_name(config.arch), " base makes it ", shape_string(shape),
                 " (an adapter of another base model)");
    }
  }
  for (const auto& [name, tensor] : adapter.tensors) {
    STOA_CHECK(expected.count(name), ErrorKind::kInvalidArgument, "LoRA adapter ", source,
               " adapts ", name, ", which this run's targets ", names(options.targets),
               " do not name; the adapter targets ", names(adapter.target_modules));
  }
}

}  // namespace stoa::train
