// `stoa model export-hf --from PATH`: what PATH names and where the weights, the tokenizer and
// the sampling settings of the export come from.
//
//   PATH                              weights                       tokenizer       sampling
//   a run config (run.toml)           newest checkpoint of [run]    [run] model     [sampling]
//                                     dir (<dir>/checkpoint)
//   a run directory                   its newest checkpoint         as above, from the run.toml
//                                                                   in it or beside it whose
//                                                                   [run] dir is this directory
//   a trainer checkpoint (trainer.json + model/)  model/            --tokenizer-from  none
//   a LoRA checkpoint (trainer.json + adapters.safetensors): the base (the run's [run] model,
//   else --base DIR) + the adapters, merged; with --adapter also the PEFT adapter
//   (app/export/lora_export.h). The tokenizer then defaults to the base's.
//   a model directory (config.json)   itself                        itself          none
//
// --tokenizer-from DIR always wins. "Newest checkpoint": of <dir>, <dir>.tmp and <dir>.old (the
// three places Trainer::save_checkpoint's renames can leave a complete one, trainer.json being
// written last), the one with the highest step; a tie goes to <dir>.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "model/hf_export.h"

namespace stoa::app {

enum class ExportFrom { kRunConfig, kRunDir, kCheckpoint, kModelDir };
const char* export_from_name(ExportFrom kind);  // "run config", "run dir", ...

struct ExportInput {
  ExportFrom kind = ExportFrom::kModelDir;
  std::string model_dir;      // config.json + weights ("" for a LoRA checkpoint)
  bool lora = false;          // a LoRA checkpoint: adapters only, merged onto base_dir
  std::string base_dir;       // LoRA: the base model directory ("" until known)
  std::string tokenizer_dir;  // "" when none was found (export_hf then refuses)
  std::optional<HfSampling> sampling;
  std::string run_config;  // the run.toml read, if any
  std::string checkpoint;  // the checkpoint chosen, if any
  int64_t checkpoint_step = -1;
};

// Throws kNotFound for a PATH that is none of the above or a run without a checkpoint yet.
// `base`: --base, the model a LoRA checkpoint's adapters belong to (a run's [run] model
// otherwise); kInvalidArgument when a LoRA checkpoint has no base.
ExportInput resolve_export_input(const std::string& from, const std::string& tokenizer_from,
                                 const std::string& base = "");

// The newest complete checkpoint of `checkpoint_dir` (see above) and its step; nullopt if none.
std::optional<std::string> newest_checkpoint(const std::string& checkpoint_dir, int64_t* step);

struct ExportHfRequest {
  std::string from;
  std::string out;
  std::string tokenizer_from;
  std::string dtype = "bf16";  // bf16 or f32
  int64_t shard_mb = 5000;     // MB of 10^6 bytes, HF's "5GB"; 0: one file
  bool adapter = false;        // LoRA: <out>/adapter (PEFT) and <out>/merged
  std::string base;            // LoRA: the base model directory (default: the run's model)
  std::string base_name;       // LoRA: adapter_config's base_model_name_or_path (default: base)
};

// Resolves, exports (model/hf_export.h) and returns what was done, for the command to print.
nlohmann::json export_hf_from(const ExportHfRequest& request);

}  // namespace stoa::app
