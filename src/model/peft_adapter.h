// LoRA adapters in PEFT's layout (torch-free), the format transformers + PEFT, vLLM and the Hub
// load: a directory with
//   adapter_config.json        peft_type "LORA", task_type "CAUSAL_LM", r, lora_alpha,
//                              lora_dropout, target_modules, base_model_name_or_path, ...
//   adapter_model.safetensors  per target module M (HF module names, as the HF export writes
//                              them): base_model.model.M.lora_A.weight [r, in] and
//                              base_model.model.M.lora_B.weight [out, r]
// PEFT computes W·x + (lora_alpha / r)·B·A·x, the same as Stoa's adapters (train/lora.h), so the
// tensors pass through unchanged; our names are PEFT's without the "base_model.model." prefix.
// The safetensors metadata also carries the base's hash (Trainer::base_hash) and the dtype it
// was taken in, so a Stoa adapter started on another base is refused; PEFT ignores the keys.
// Which modules a run adapts and whether an adapter fits a run: train/lora.h.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace stoa {

inline constexpr const char* kPeftConfigFile = "adapter_config.json";
inline constexpr const char* kPeftWeightsFile = "adapter_model.safetensors";
inline constexpr const char* kPeftTensorPrefix = "base_model.model.";

struct PeftAdapter {
  int64_t rank = 0;  // r
  double alpha = 0;  // lora_alpha: the scale is alpha / rank
  double dropout = 0;
  std::vector<std::string> target_modules;
  std::string base_model;                 // base_model_name_or_path
  std::string base_hash;                  // "" for an adapter not written by Stoa
  std::string base_hash_dtype;            // the dtype the base was hashed in ("bf16", "f32")
  std::map<std::string, Tensor> tensors;  // f32, by our names ("<module>.lora_A.weight")
};

// "<module>.lora_A.weight" / ".lora_B.weight" -> "<module>"; "" for any other name.
std::string peft_module_of(const std::string& tensor_name);

// Writes `dir` (absent or empty) through dir.tmp + rename. Throws kInvalidArgument for a rank
// below 1, a non-positive alpha, or a tensor whose name is not an adapter's.
void write_peft_adapter(const std::string& dir, const PeftAdapter& adapter);

// Reads a PEFT LoRA adapter directory. Throws kNotFound for a missing file, kBadFormat naming the
// file for unreadable JSON or safetensors, a missing or mistyped key, a tensor that is not a
// LoRA A/B matrix or not a float, an A without its B; kUnsupported for PEFT features Stoa's
// adapters do not compute (DoRA, rsLoRA, per-module rank or alpha patterns, trained biases,
// fan_in_fan_out, layers_to_transform, modules_to_save).
PeftAdapter read_peft_adapter(const std::string& dir);

}  // namespace stoa
