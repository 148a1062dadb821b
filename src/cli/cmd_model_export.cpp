// `stoa model export-gguf`: writes a model as GGUF v3 (F32, F16 or Q8_0) with llama.cpp's names
// and metadata, from a Hugging Face model directory (safetensors, or an int8-sized one), another
// GGUF, or a seeded random preset (the oracle tests and the llama.cpp benchmarks export presets
// this way), one tensor at a time. Q8_0 is Stoa's int8 grid bit for bit.
// With --adapter DIR (a PEFT LoRA adapter, e.g. `stoa model export-hf --adapter`'s) it writes
// llama.cpp's LoRA adapter GGUF for the base the other options name instead
// (model/gguf_lora_adapter.h); llama.cpp loads the base GGUF and the adapter together.
// `stoa model import-gguf FILE --out DIR` is the way back (safetensors, f32/bf16/f16).
// `stoa model gguf-info FILE` prints what a GGUF holds (validated by Stoa's own reader).
#include <cstdio>
#include <filesystem>
#include <memory>

#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "core/error.h"
#include "model/gguf_lora_adapter.h"
#include "model/gguf_reader.h"
#include "model/gguf_source.h"
#include "model/gguf_writer.h"
#include "model/peft_adapter.h"
#include "model/presets.h"
#include "model/weights.h"

namespace stoa::cli {
namespace {

struct ExportOptions {
  std::string model;
  std::string preset;
  std::string gguf;
  uint64_t seed = 0;
  double std = 0.02;
  std::string out;
  std::string type = "f32";
  std::string name;
  std::string adapter;  // a PEFT adapter directory: write its llama.cpp adapter GGUF
};

// The model to export, made or read one tensor at a time.
std::unique_ptr<TensorSource> open_source(const ExportOptions& opts) {
  namespace fs = std::filesystem;
  if (!opts.preset.empty()) {
    return std::make_unique<RandomTensorSource>(preset_config(opts.preset), opts.seed,
                                                static_cast<float>(opts.std));
  }
  if (!opts.gguf.empty()) return std::make_unique<GgufTensorSource>(opts.gguf);
  // An int8-sized directory holds model.gguf instead of safetensors.
  if (fs::is_directory(opts.model) && !fs::exists(fs::path(opts.model) / "model.safetensors") &&
      !fs::exists(fs::path(opts.model) / "model.safetensors.index.json") &&
      fs::exists(fs::path(opts.model) / kModelGgufName)) {
    return std::make_unique<GgufTensorSource>((fs::path(opts.model) / kModelGgufName).string());
  }
  return std::make_unique<ModelDirTensorSource>(opts.model);
}

int run_export(const ExportOptions& opts) {
  STOA_CHECK(opts.model.empty() + opts.preset.empty() + opts.gguf.empty() == 2,
             ErrorKind::kInvalidArgument,
             "give exactly one of --model DIR, --gguf FILE or --preset NAME");
  STOA_CHECK(!opts.out.empty(), ErrorKind::kInvalidArgument, "--out FILE is required");
  GgufExportOptions options;
  options.type = parse_gguf_export_type(opts.type);
  options.model_name = !opts.name.empty()     ? opts.name
                       : !opts.preset.empty() ? opts.preset
                       : !opts.gguf.empty()   ? opts.gguf
                                              : opts.model;
  std::unique_ptr<TensorSource> source = open_source(opts);
  if (!opts.adapter.empty()) {
    const PeftAdapter adapter = read_peft_adapter(opts.adapter);
    const GgufLoraAdapterSummary written = export_gguf_lora_adapter(
        source->config(), adapter, opts.out, opts.name.empty() ? opts.adapter : opts.name);
    GgufFile check = GgufFile::open(opts.out);  // re-read: the file we leave behind parses
    nlohmann::json summary = {{"out", opts.out},
                              {"adapter", opts.adapter},
                              {"architecture", written.architecture},
                              {"matrices", written.matrices},
                              {"rank", adapter.rank},
                              {"alpha", adapter.alpha},
                              {"tensors", check.tensors().size()}};
    std::printf("%s\n", summary.dump(2).c_str());
    return 0;
  }
  export_gguf(*source, opts.out, options);
  GgufFile check = GgufFile::open(opts.out);  // re-read: the file we leave behind parses
  nlohmann::json summary = {{"out", opts.out},
                            {"type", gguf_export_type_name(options.type)},
                            {"model_type", arch_name(source->config().arch)},
                            {"tensors", check.tensors().size()},
                            {"metadata_keys", check.metadata().size()}};
  std::printf("%s\n", summary.dump(2).c_str());
  return 0;
}

struct ImportOptions {
  std::string gguf;
  std::string out;
  std::string dtype = "bf16";
};

// GGUF -> Hugging Face directory, one tensor at a time (Q8_0 dequantized per tensor).
int run_import(const ImportOptions& opts) {
  DType dtype;
  STOA_CHECK(parse_dtype(opts.dtype, &dtype) &&
                 (dtype == DType::kF32 || dtype == DType::kBF16 || dtype == DType::kF16),
             ErrorKind::kInvalidArgument, "--dtype must be f32, bf16 or f16, not '", opts.dtype,
             "'");
  GgufTensorSource source(opts.gguf);
  save_model_dir(source, opts.out, dtype);
  nlohmann::json summary = {{"out", opts.out},
                            {"model_type", arch_name(source.config().arch)},
                            {"tensors", source.specs().size()},
                            {"dtype", dtype_name(dtype)}};
  std::printf("%s\n", summary.dump(2).c_str());
  return 0;
}

int run_info(const std::string& path, bool tensors) {
  GgufFile file = GgufFile::open(path);
  nlohmann::json meta = nlohmann::json::object();
  for (const auto& [key, value] : file.metadata()) meta[key] = value.describe();
  nlohmann::json out = {{"file", path},
                        {"version", file.version()},
                        {"metadata", meta},
                        {"tensor_count", file.tensors().size()}};
  if (tensors) {
    nlohmann::json list = nlohmann::json::array();
    for (const GgufTensorInfo& t : file.tensors())
      list.push_back({{"name", t.name}, {"type", gguf::ggml_type_name(t.type)}, {"ne", t.ne}});
    out["tensors"] = list;
  }
  std::printf("%s\n", out.dump(2).c_str());
  return 0;
}

CommandRegistration reg_export(
    "model export-gguf", "Export a model to GGUF (F32, F16, Q8_0) for llama.cpp",
    [](CLI::App& app) {
      auto opts = std::make_shared<ExportOptions>();
      app.add_option("--model", opts->model, "Hugging Face model directory");
      app.add_option("--preset", opts->preset, "Seeded random model from a preset instead");
      app.add_option("--gguf", opts->gguf, "A GGUF file instead (re-export, e.g. Q8_0 -> F16)");
      app.add_option("--seed", opts->seed, "Seed for --preset")->capture_default_str();
      app.add_option("--std", opts->std, "Std of the random matrices")->capture_default_str();
      app.add_option("--out", opts->out, "GGUF file to write");
      app.add_option("--type", opts->type, "f32, f16 or q8_0")->capture_default_str();
      app.add_option("--name", opts->name, "general.name (default: the model or preset)");
      app.add_option("--adapter", opts->adapter,
                     "A PEFT LoRA adapter directory: write llama.cpp's LoRA adapter GGUF for the "
                     "base named by --model/--gguf/--preset (its shapes and names) instead");
      return [opts] { return run_export(*opts); };
    });

CommandRegistration reg_import(
    "model import-gguf", "Import a GGUF (F32, F16, BF16, Q8_0) as a Hugging Face directory",
    [](CLI::App& app) {
      auto opts = std::make_shared<ImportOptions>();
      app.add_option("file", opts->gguf, "GGUF file")->required();
      app.add_option("--out", opts->out, "Directory to write")->required();
      app.add_option("--dtype", opts->dtype, "f32, bf16 or f16")->capture_default_str();
      return [opts] { return run_import(*opts); };
    });

CommandRegistration reg_info("model gguf-info", "Print a GGUF file's metadata (validated)",
                             [](CLI::App& app) {
                               auto path = std::make_shared<std::string>();
                               auto tensors = std::make_shared<bool>(false);
                               app.add_option("file", *path, "GGUF file")->required();
                               app.add_flag("--tensors", *tensors, "List the tensors too");
                               return [path, tensors] { return run_info(*path, *tensors); };
                             });

}  // namespace
}  // namespace stoa::cli
