// `stoa model init`: writes a seeded random model directory (config.json + model.safetensors)
// from a named preset or a Hugging Face config.json. Prints a JSON summary whose state_hash
// lets two machines confirm they built the same model from the same seed.
#include <cstdio>
#include <memory>

#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "core/error.h"
#include "core/hash.h"
#include "model/arch_registry.h"
#include "model/presets.h"
#include "model/weights.h"

namespace stoa::cli {
namespace {

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
  DType dtype;
  STOA_CHECK(parse_dtype(opts.dtype, &dtype) &&
                 (dtype == DType::kF32 || dtype == DType::kBF16 || dtype == DType::kF16),
             ErrorKind::kInvalidArgument, "--dtype must be f32, bf16 or f16, not '", opts.dtype,
             "'");
  ModelConfig config =
      opts.preset.empty() ? load_model_config(opts.config) : preset_config(opts.preset);
  ModelWeights weights = random_weights(config, opts.seed, static_cast<float>(opts.std));
  StateHasher hasher;
  for (const auto& [name, tensor] : weights.tensors) hasher.add(name, tensor.view());
  save_model_dir(weights, opts.out, dtype);
  nlohmann::json summary = {{"out", opts.out},
                            {"model_type", arch_name(config.arch)},
                            {"parameters", count_parameters(config)},
                            {"active_parameters", count_active_parameters(config)},
                            {"seed", opts.seed},
                            {"std", opts.std},
                            {"dtype", dtype_name(dtype)},
                            {"f32_state_hash", hasher.finish().hex()}};
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
      app.add_option("--dtype", opts->dtype, "f32, bf16 or f16")->capture_default_str();
      app.add_flag("--list", opts->list, "List the presets and exit");
      return [opts] { return run_init(*opts); };
    });

}  // namespace
}  // namespace stoa::cli
