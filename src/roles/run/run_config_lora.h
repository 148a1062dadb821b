// [trainer.lora] of the run config: LoRA for the run's trainer (train/lora.h), read, written and
// checked apart from run_config.cpp. The section's presence turns LoRA on; absent, the trainer
// fine-tunes every parameter.
//
//   [trainer.lora]
//   rank = 8                          # required, >= 1
//   alpha = 16.0                      # the adapters' scale is alpha / rank
//   dropout = 0.0                     # on the adapters' input, in [0, 1)
//   target_modules = ["all-linear"]   # PEFT's module names, or one string
//   base_dtype = "bf16"               # the frozen base: bf16 or f32
//   init_adapter = "adapter"          # optional: a PEFT adapter directory the adapters start
//                                     # from (model/peft_adapter.h; relative to the config)
//
// LoRA trains in one process so far: `sharding = "fsdp"` and data-parallel ranks
// (`stoa train --nproc N`) are refused in words.
#pragma once
#include <string>

#include <toml++/toml.h>

#include "train/train_options.h"

namespace stoa::run {

// Reads the [trainer] table's `lora` entry (null: absent, LoRA off) into train->lora; throws
// kInvalidArgument naming `source` and the key for an unknown key, a wrong type, an out-of-range
// value or LoRA with fsdp sharding.
// `base_dir`: what a relative init_adapter is relative to (the config's directory; "": as given).
void read_lora_section(const toml::node* lora, const std::string& source,
                       train::TrainOptions* train, const std::string& base_dir = "");

// The "[trainer.lora]" section's TOML text (a blank line first), "" when LoRA is off.
// read_lora_section reads it back to the same options.
std::string lora_section_toml(const train::LoraOptions& lora);

// What the file alone cannot tell: every target names a matrix of the model in `model_dir`, and
// an init_adapter is a PEFT LoRA adapter of this rank, alpha and targets for that model
// (check_peft_adapter). Throws kInvalidArgument naming [trainer.lora] (an unreadable adapter: its
// own kind); a no-op without LoRA. Any number of data-parallel ranks trains adapters (ZeRO-1:
// docs/design/train.md); fully sharded ranks are refused at parse.
void check_lora_run(const train::TrainOptions& train, const std::string& model_dir);

}  // namespace stoa::run
