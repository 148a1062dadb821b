// `stoa model export-hf --from PATH --out DIR`: the trained policy (or any model) as a Hugging
// Face directory — bf16 or f32 safetensors with the published tensor names (sharded past
// --shard-mb), config.json, the tokenizer files and chat template, generation_config.json.
// PATH is a run config, a run directory, a trainer checkpoint or a model directory
// (app/export/hf_export_from.h says where each part comes from). A LoRA run or checkpoint gives
// the merged model, and with --adapter the PEFT adapter beside it (app/export/lora_export.h).
#include <cstdio>
#include <memory>

#include "app/export/hf_export_from.h"
#include "cli/command.h"

namespace stoa::cli {
namespace {

CommandRegistration reg_export_hf(
    "model export-hf",
    "Export a run's policy (or a model) as a Hugging Face directory: safetensors, config, "
    "tokenizer, chat template, generation config",
    [](CLI::App& app) {
      auto request = std::make_shared<app::ExportHfRequest>();
      app.add_option("--from", request->from,
                     "run.toml, run directory, trainer checkpoint or model directory")
          ->required();
      app.add_option("--out", request->out, "Directory to write (absent or empty)")->required();
      app.add_option("--dtype", request->dtype, "bf16 or f32")->capture_default_str();
      app.add_option("--tokenizer-from", request->tokenizer_from,
                     "Directory with tokenizer.json and tokenizer_config.json (default: the "
                     "run's [run] model, or the model directory itself)");
      app.add_option("--shard-mb", request->shard_mb,
                     "Largest safetensors file in MB (10^6 bytes) before sharding; 0: one file")
          ->capture_default_str();
      app.add_flag("--adapter", request->adapter,
                   "LoRA: write <out>/adapter (PEFT: adapter_config.json, "
                   "adapter_model.safetensors) and <out>/merged (base + scale*B*A)");
      app.add_option("--base", request->base,
                     "LoRA: the base model directory the adapters were trained on (default: the "
                     "run's [run] model)");
      app.add_option("--base-name", request->base_name,
                     "LoRA: adapter_config.json's base_model_name_or_path, e.g. a Hub id "
                     "(default: the base directory's absolute path)");
      return [request] {
        std::printf("%s\n", app::export_hf_from(*request).dump(2).c_str());
        return 0;
      };
    });

}  // namespace
}  // namespace stoa::cli
