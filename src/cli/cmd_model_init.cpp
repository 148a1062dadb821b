// `stoa model init`: writes a seeded random model directory (config.json + model.safetensors,
// or with --dtype q8_0 config.json + model.gguf) from a named preset or a Hugging Face
// config.json, one tensor at a time, with the tokenizer of --tokenizer DIR (its ids written into
// the config) or, with --tokenizer bytes, none by intent. Prints a JSON summary whose
// f32_state_hash (safetensors dtypes) lets two machines confirm they built the same model from
// the same seed, and on stderr where the tokenizer came from or must come from.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>

#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "core/error.h"
#include "core/hash.h"
#include "env/end_of_turn.h"
#include "env/model_codec.h"
#include "env/tokenizer_codec.h"
#include "model/arch_registry.h"
#include "model/chat_template.h"
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

// The files of a model's tokenizer and chat template that --tokenizer DIR copies when present.
constexpr const char* kTokenizerFiles[] = {"tokenizer.json", "tokenizer_config.json",
                                           "chat_template.jinja"};

// tokenizer_config.json's `key` token ("<|endoftext|>" or {"content": ...}) as an id, -1 if none.
int64_t configured_token_id(const std::string& dir, const char* key, const Tokenizer& tokenizer) {
  const std::filesystem::path path = std::filesystem::path(dir) / "tokenizer_config.json";
  if (!std::filesystem::exists(path)) return -1;
  const nlohmann::json config = nlohmann::json::parse(std::ifstream(path));
  nlohmann::json token = config.value(key, nlohmann::json());
  if (token.is_object()) token = token.value("content", nlohmann::json());
  if (!token.is_string()) return -1;
  return tokenizer.token_id(token.get<std::string>()).value_or(-1);
}

// Fits `config` to the tokenizer in `dir`. A preset's vocabulary is a placeholder: it becomes the
// tokenizer's, rounded up to the int8 grid's groups of 32; a given config's must hold it. BOS and
// PAD become the tokenizer's own, and EOS the token its chat template ends a turn with
// (env/end_of_turn.h): generation then stops where the template says a turn ends, which the
// presets' placeholder ids (bytes in a trained tokenizer) never do.
void fit_to_tokenizer(ModelConfig& config, const std::string& dir, bool preset) {
  const std::string tokenizer_path = dir + "/tokenizer.json";
  STOA_CHECK(std::filesystem::exists(tokenizer_path), ErrorKind::kNotFound, "--tokenizer ", dir,
             ": no tokenizer.json there (`stoa tokenizer train --out DIR` writes one)");
  const env::TokenizerCodec codec(Tokenizer::from_file(tokenizer_path),
                                  ChatTemplate::from_model_dir(dir));
  const Tokenizer& tokenizer = codec.tokenizer();
  if (preset) {
    config.vocab_size = (tokenizer.vocab_size() + 31) / 32 * 32;
  } else {
    STOA_CHECK(tokenizer.vocab_size() <= config.vocab_size, ErrorKind::kInvalidArgument,
               "--tokenizer ", dir, " has ", tokenizer.vocab_size(),
               " tokens but the config's vocab_size is ", config.vocab_size);
  }
  config.bos_token_id = configured_token_id(dir, "bos_token", tokenizer);
  config.pad_token_id = configured_token_id(dir, "pad_token", tokenizer);
  const std::optional<env::EndOfTurnToken> end = env::end_of_turn_token(codec);
  config.eos_token_id = end ? end->id : configured_token_id(dir, "eos_token", tokenizer);
}

struct InitOptions {
  std::string preset;
  std::string config;
  std::string out;
  std::string tokenizer;  // a directory with tokenizer.json, "bytes", or "" (none yet)
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
  const bool bytes = opts.tokenizer == "bytes";
  if (bytes) {
    config.byte_tokens = true;
    validate_model_config(config, "--tokenizer bytes");
  } else if (!opts.tokenizer.empty()) {
    fit_to_tokenizer(config, opts.tokenizer, !opts.preset.empty());
    validate_model_config(config, "--tokenizer " + opts.tokenizer);
  }
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
  if (!bytes && !opts.tokenizer.empty()) {
    for (const char* name : kTokenizerFiles) {
      const std::filesystem::path from = std::filesystem::path(opts.tokenizer) / name;
      if (std::filesystem::exists(from))
        std::filesystem::copy_file(from, std::filesystem::path(opts.out) / name,
                                   std::filesystem::copy_options::overwrite_existing);
    }
  }
  summary["tokenizer"] =
      opts.tokenizer.empty() ? nlohmann::json(nullptr) : nlohmann::json(opts.tokenizer);
  summary["eos_token_id"] = config.eos_token_id;
  std::printf("%s\n", summary.dump(2).c_str());
  // Where the tokenizer comes from, said where the user looks: a run refuses the model without.
  if (bytes) {
    std::fprintf(stderr, "model init: %s uses one token per byte (config.json says so)\n",
                 opts.out.c_str());
  } else if (opts.tokenizer.empty()) {
    std::fprintf(stderr,
                 "model init: %s has no tokenizer yet, and `stoa run`, `stoa work` and `stoa "
                 "eval` refuse it until it has one: %s\n",
                 opts.out.c_str(), env::missing_tokenizer_advice().c_str());
  } else {
    std::fprintf(stderr, "model init: tokenizer from %s (eos_token_id %lld)\n",
                 opts.tokenizer.c_str(), static_cast<long long>(config.eos_token_id));
  }
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
      app.add_option("--tokenizer", opts->tokenizer,
                     "A directory with tokenizer.json (`stoa tokenizer train --out DIR`, or a "
                     "Hugging Face model's): copied in, its vocabulary and special ids written "
                     "into config.json; or `bytes` for one token per byte");
      app.add_flag("--list", opts->list, "List the presets and exit");
      return [opts] { return run_init(*opts); };
    });

}  // namespace
}  // namespace stoa::cli
