// `stoa model export-hf` of a LoRA checkpoint (adapters.safetensors + trainer.json, no model/):
// the trainer is resumed on the base (refused with kIntegrity when the base's hash is not the
// checkpoint's), then
//   the merged model W + (alpha/rank)·B·A as an HF directory (model/hf_export.h), made one
//     tensor at a time from the trainer's merged view — what the run published;
//   with `adapter`, also the adapters in PEFT's layout (model/peft_adapter.h), tensors bit for
//     bit the checkpoint's, and the merged model beside them: <out>/adapter and <out>/merged.
#pragma once
#include <string>

#include <nlohmann/json.hpp>

#include "model/hf_export.h"

namespace stoa::app {

struct LoraExportRequest {
  std::string checkpoint;
  std::string base_dir;   // the model the run started from
  std::string base_name;  // adapter_config.json's base_model_name_or_path ("": base_dir, absolute)
  std::string out;
  bool adapter = false;  // also the PEFT adapter (<out>/adapter, the merged model <out>/merged)
  HfExportOptions hf;    // dtype, shards, tokenizer, sampling of the merged model
};

// What was written, for the command to print: the merged export's summary fields (tensors,
// shards, files, ...) and, with `adapter`, "adapter_dir", "merged_dir", "adapter_tensors",
// "rank", "alpha", "target_modules".
nlohmann::json export_lora_checkpoint(const LoraExportRequest& request);

}  // namespace stoa::app
