// `stoa model export-hf`: resolving --from (see the header's table) and running the export.
#include "app/export/hf_export_from.h"

#include <charconv>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>

#include "app/export/lora_export.h"
#include "core/enum_names.h"
#include "core/error.h"
#include "model/gguf_source.h"
#include "model/tensor_source.h"
#include "model/weights.h"
#include "roles/run/run_config.h"

namespace stoa::app {

namespace fs = std::filesystem;

namespace {

// The run config keeps sampling in floats; 0.7f must reach generation_config.json as 0.7, not
// 0.699999988: the float's shortest decimal form, read back as a double.
double shortest(float value) {
  char text[32];
  auto [end, ec] = std::to_chars(text, text + sizeof text, value);
  STOA_CHECK(ec == std::errc(), ErrorKind::kInternal, "cannot format ", value);
  *end = '\0';
  return std::strtod(text, nullptr);
}

HfSampling sampling_of(const run::RunConfig& c) {
  return {shortest(c.hub.sampling.temperature), shortest(c.hub.sampling.top_p),
          c.hub.sampling.top_k};
}

int64_t checkpoint_step(const fs::path& dir) {
  std::ifstream in(dir / "trainer.json", std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  nlohmann::json meta = nlohmann::json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  STOA_CHECK(meta.is_object() && meta.contains("step") && meta["step"].is_number_integer(),
             ErrorKind::kBadFormat, (dir / "trainer.json").string(),
             ": not a trainer checkpoint's trainer.json (no integer step)");
  return meta["step"].get<int64_t>();
}

constexpr const char* kLoraAdaptersFile = "adapters.safetensors";  // train/checkpoint.cpp

bool is_lora_checkpoint(const fs::path& dir) {
  return fs::is_regular_file(dir / "trainer.json") && fs::is_regular_file(dir / kLoraAdaptersFile);
}

bool is_checkpoint(const fs::path& dir) {
  return (fs::is_regular_file(dir / "trainer.json") && fs::is_directory(dir / "model")) ||
         is_lora_checkpoint(dir);
}

void set_checkpoint(const std::string& ckpt, ExportInput* input) {
  input->checkpoint = ckpt;
  input->lora = is_lora_checkpoint(ckpt);
  input->model_dir = input->lora ? "" : (fs::path(ckpt) / "model").string();
}

bool same_dir(const fs::path& a, const fs::path& b) {
  std::error_code ec;
  return fs::exists(a, ec) && fs::exists(b, ec) && fs::equivalent(a, b, ec);
}

// The run.toml of run directory `dir`: inside it (the demo's layout) or beside it (the
// integration cluster's), whichever names `dir` as its [run] dir.
std::optional<std::string> find_run_config(const fs::path& dir) {
  for (const fs::path& candidate : {dir / "run.toml", dir.parent_path() / "run.toml"}) {
    if (!fs::is_regular_file(candidate)) continue;
    if (same_dir(run::load_run_config(candidate.string()).run_dir, dir)) return candidate.string();
  }
  return std::nullopt;
}

bool looks_like_run_dir(const fs::path& dir) {
  for (const char* name : {"run.toml", "ledger.sqlite", "checkpoint", "checkpoint.tmp",
                           "checkpoint.old", "steps.jsonl"}) {
    if (fs::exists(dir / name)) return true;
  }
  return false;
}

void use_checkpoint_of_run(const std::string& checkpoint_dir, const std::string& run,
                           ExportInput* input) {
  int64_t step = -1;
  std::optional<std::string> ckpt = newest_checkpoint(checkpoint_dir, &step);
  STOA_CHECK(ckpt.has_value(), ErrorKind::kNotFound, "export-hf: run ", run,
             " has no checkpoint yet (looked for ", checkpoint_dir,
             "/trainer.json; the trainer writes one every [trainer] checkpoint_every steps)");
  set_checkpoint(*ckpt, input);
  input->checkpoint_step = step;
}

void use_run_config(const std::string& path, ExportInput* input) {
  const run::RunConfig c = run::load_run_config(path);
  input->run_config = path;
  input->tokenizer_dir = c.model_dir;
  input->sampling = sampling_of(c);
  input->base_dir = c.model_dir;  // a LoRA run's base
  use_checkpoint_of_run(c.loop.checkpoint_dir, c.run_dir, input);
}

}  // namespace

constexpr EnumName<ExportFrom> kExportFromNames[] = {{ExportFrom::kRunConfig, "run config"},
                                                     {ExportFrom::kRunDir, "run dir"},
                                                     {ExportFrom::kCheckpoint, "checkpoint"},
                                                     {ExportFrom::kModelDir, "model dir"}};

const char* export_from_name(ExportFrom kind) {
  return enum_name(kExportFromNames, kind);
}

std::optional<std::string> newest_checkpoint(const std::string& checkpoint_dir, int64_t* step) {
  std::optional<std::string> best;
  int64_t best_step = -1;
  for (const std::string& candidate :
       {checkpoint_dir, checkpoint_dir + ".tmp", checkpoint_dir + ".old"}) {
    if (!is_checkpoint(candidate)) continue;
    const int64_t s = checkpoint_step(candidate);
    if (!best || s > best_step) {
      best = candidate;
      best_step = s;
    }
  }
  if (step) *step = best_step;
  return best;
}

ExportInput resolve_export_input(const std::string& from, const std::string& tokenizer_from,
                                 const std::string& base) {
  STOA_CHECK(!from.empty(), ErrorKind::kInvalidArgument, "export-hf: --from PATH is required");
  const fs::path path(from);
  ExportInput input;
  if (fs::is_regular_file(path)) {
    input.kind = ExportFrom::kRunConfig;
    use_run_config(from, &input);
  } else if (!fs::is_directory(path)) {
    fail(ErrorKind::kNotFound, "export-hf: ", from, " does not exist");
  } else if (is_checkpoint(path)) {
    input.kind = ExportFrom::kCheckpoint;
    set_checkpoint(from, &input);
    input.checkpoint_step = checkpoint_step(path);
  } else if (fs::is_regular_file(path / "config.json")) {
    input.kind = ExportFrom::kModelDir;
    input.model_dir = from;
    input.tokenizer_dir = from;
  } else if (looks_like_run_dir(path)) {
    input.kind = ExportFrom::kRunDir;
    if (std::optional<std::string> config = find_run_config(path)) {
      use_run_config(*config, &input);
    } else {
      use_checkpoint_of_run((path / "checkpoint").string(), from, &input);
    }
  } else {
    fail(ErrorKind::kNotFound, "export-hf: ", from,
         " is not a run config, a run directory, a trainer checkpoint (trainer.json + model/) "
         "or a model directory (config.json)");
  }
  if (!base.empty()) input.base_dir = base;
  if (input.lora) {
    STOA_CHECK(!input.base_dir.empty(), ErrorKind::kInvalidArgument,
               "export-hf: ", input.checkpoint,
               " is a LoRA checkpoint (adapters only, no model/): give --base DIR, the model "
               "directory the run started from");
    if (input.tokenizer_dir.empty()) input.tokenizer_dir = input.base_dir;
  } else {
    input.base_dir.clear();
  }
  if (!tokenizer_from.empty()) input.tokenizer_dir = tokenizer_from;
  STOA_CHECK(!input.tokenizer_dir.empty(), ErrorKind::kNotFound, "export-hf: ", from, " is a ",
             export_from_name(input.kind),
             " without a tokenizer (no run.toml names the model it started from); give "
             "--tokenizer-from DIR, the model directory the run started from");
  return input;
}

nlohmann::json export_hf_from(const ExportHfRequest& request) {
  HfExportOptions options;
  STOA_CHECK(parse_dtype(request.dtype, &options.dtype) &&
                 (options.dtype == DType::kBF16 || options.dtype == DType::kF32),
             ErrorKind::kInvalidArgument, "export-hf: --dtype must be bf16 or f32, not '",
             request.dtype, "'");
  STOA_CHECK(request.shard_mb >= 0, ErrorKind::kInvalidArgument,
             "export-hf: --shard-mb must be >= 0 (0: one file), not ", request.shard_mb);
  STOA_CHECK(!request.out.empty(), ErrorKind::kInvalidArgument, "export-hf: --out DIR is required");
  options.shard_bytes = static_cast<uint64_t>(request.shard_mb) * 1'000'000;
  const auto start = std::chrono::steady_clock::now();
  const ExportInput input =
      resolve_export_input(request.from, request.tokenizer_from, request.base);
  options.tokenizer_dir = input.tokenizer_dir;
  options.sampling = input.sampling;
  STOA_CHECK(input.lora || !request.adapter, ErrorKind::kInvalidArgument, "export-hf: --adapter ",
             "wants a LoRA run or checkpoint (adapters.safetensors); ", request.from, " is a ",
             export_from_name(input.kind), " of a fully fine-tuned model");
  nlohmann::json summary;
  if (input.lora) {
    summary = export_lora_checkpoint({input.checkpoint, input.base_dir, request.base_name,
                                      request.out, request.adapter, options});
  } else {
    const std::unique_ptr<TensorSource> source = open_model_dir_source(input.model_dir);
    const HfExportResult result = export_hf(*source, request.out, options);
    summary = {
        {"model_dir", input.model_dir},
        {"model_type", arch_name(source->config().arch)},
        {"tensors", result.tensors},
        {"shards", result.shards},
        {"tensor_bytes", result.tensor_bytes},
        {"files", result.files},
        {"chat_template", result.chat_template.empty() ? nlohmann::json(nullptr)
                                                       : nlohmann::json(result.chat_template)}};
  }
  summary["out"] = request.out;
  summary["from"] = export_from_name(input.kind);
  summary["tokenizer_from"] = input.tokenizer_dir;
  summary["dtype"] = dtype_name(options.dtype);
  summary["seconds"] =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!input.run_config.empty()) summary["run_config"] = input.run_config;
  if (!input.checkpoint.empty()) {
    summary["checkpoint"] = input.checkpoint;
    summary["checkpoint_step"] = input.checkpoint_step;
  }
  if (input.sampling) {
    summary["sampling"] = {{"temperature", input.sampling->temperature},
                           {"top_p", input.sampling->top_p},
                           {"top_k", input.sampling->top_k}};
  }
  return summary;
}

}  // namespace stoa::app
