// `stoa model init`: writes a seeded random model directory (config.json + model.safetensors,
// or with --dtype q8_0 config.json + model.gguf) from a named preset or a Hugging Face
// config.json, one tensor at a time. Prints a JSON summary whose f32_state_hash (safetensors
// dtypes) lets two machines confirm they built the same model from the same seed.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>

#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "core/error.h"
#include "core/hash.h"
#include "model/arch_registry.h"
#include "model/gguf_writer.h"
#include "model/presets.h"
#include "model/tensor_source.h"
#include "model/weights.h"

namespace stoa::cli {
namespace {

// StateHasher wants tensors in name order; the safetensors writer makes them in file order
// (element size, then name). Tensors that come early wait here for their turn: with the
// writer's order that is only the few f32-kept ones (expert bias) of a bf16/f16 directory.
class OrderedStateHasher {
 public:
  explicit OrderedStateHasher(const std::vector<TensorSpec>& specs) {
    for (const TensorSpec& s : specs) names_.push_back(s.name);
    std::sort(names_.begin(), names_.end());
  }
  void add(const std::string& name, const Tensor& f32) {
    if (next_ < names_.size() && names_[next_] == name) {
      hasher_.add(name, f32.view());  // its turn: no copy
      ++next_;
    } else {
      waiting_.emplace(name, f32.clone());
    }
    while (next_ < names_.size()) {
      auto it = waiting_.find(names_[next_]);
      if (it == waiting_.end()) break;
      hasher_.add(it->first, it->second.view());
      waiting_.erase(it);
      ++next_;
    }
  }
  Hash128 finish() const {
    STOA_CHECK(next_ == names_.size(), ErrorKind::kInternal, "state hash: ", names_.size() - next_,
               " tensors never came");
    return hasher_.finish();
  }

 private:
  std::vector<std::string> names_;
  size_t next_ = 0;
  std::map<std::string, Tensor> waiting_;
  StateHasher hasher_;
};

struct InitOptions {
  std::string preset;
  std::string config;
  std::string out;
  std::string dtype = "f32";
  uint64_t seed = 0;
  double std = 0.02;
  bool list = false;
};

int run_init(const InitOptions& opts) {
  if (opts.list) {
    for (const PresetInfo& p : model_presets()) {
      ModelConfig c = preset_config(p.name);
      std::printf("%-14s %-9s %13lld params  %s\n", p.name.c_str(), arch_name(c.arch),
                  static_cast<long long>(count_parameters(c)), p.description.c_str());
    }
    return 0;
  }
  STOA_CHECK(opts.preset.empty() != opts.config.empty(), ErrorKind::kInvalidArgument,
             "give exactly one of --preset NAME or --config FILE");
  STOA_CHECK(!opts.out.empty(), ErrorKind::kInvalidArgument, "--out DIR is required");
  const bool q8 = opts.dtype == "q8_0" || opts.dtype == "q8";
  DType dtype = DType::kF32;
  STOA_CHECK(q8 || (parse_dtype(opts.dtype, &dtype) &&
                    (dtype == DType::kF32 || dtype == DType::kBF16 || dtype == DType::kF16)),
             ErrorKind::kInvalidArgument, "--dtype must be f32, bf16, f16 or q8_0, not '",
             opts.dtype, "'");
  ModelConfig config =
      opts.preset.empty() ? load_model_config(opts.config) : preset_config(opts.preset);
  // Made one tensor at a time (RandomTensorSource): the values are random_weights' bit for bit.
  RandomTensorSource source(config, opts.seed, static_cast<float>(opts.std));
  nlohmann::json summary = {{"out", opts.out},
                            {"model_type", arch_name(config.arch)},
                            {"parameters", count_parameters(config)},
                            {"active_parameters", count_active_parameters(config)},
                            {"seed", opts.seed},
                            {"std", opts.std},
                            {"dtype", q8 ? std::string("q8_0") : dtype_name(dtype)}};
  if (q8) {
    // The int8-sized directory: the weights as a Q8_0 GGUF (Stoa's int8 grid bit for bit).
    std::error_code ec;
    std::filesystem::create_directories(opts.out, ec);
    STOA_CHECK(!ec, ErrorKind::kIo, opts.out, ": cannot create directory: ", ec.message());
    GgufExportOptions eo;
    eo.type = GgufExportType::kQ8_0;
    eo.model_name = opts.preset.empty() ? opts.config : opts.preset;
    export_gguf(source, (std::filesystem::path(opts.out) / kModelGgufName).string(), eo);
    write_model_dir_config(config, opts.out, "int8");
  } else {
    OrderedStateHasher hasher(source.specs());
    save_model_dir(source, opts.out, dtype,
                   [&](const TensorSpec& spec, const Tensor& f32) { hasher.add(spec.name, f32); });
    summary["f32_state_hash"] = hasher.finish().hex();
  }
  std::printf("%s\n", summary.dump(2).c_str());
  return 0;
}

CommandRegistration reg(
    "model init", "Write a seeded random model directory (HF layout)", [](CLI::App& app) {
      auto opts = std::make_shared<InitOptions>();
      app.add_option("--preset", opts->preset, "Named config (see --list): tiny-qwen3, demo, ...");
      app.add_option("--config", opts->config, "A Hugging Face config.json instead of a preset");
      app.add_option("--out", opts->out, "Directory to write");
      app.add_option("--seed", opts->seed, "Random seed")->capture_default_str();
      app.add_option("--std", opts->std, "Std of the N(0, std) matrices")->capture_default_str();
      app.add_option("--dtype", opts->dtype, "f32, bf16, f16 or q8_0 (int8-sized: model.gguf)")
          ->capture_default_str();
      app.add_flag("--list", opts->list, "List the presets and exit");
      return [opts] { return run_init(*opts); };
    });

}  // namespace
}  // namespace stoa::cli
