// `stoa model export-hf`'s writer: a model as a Hugging Face directory that transformers,
// vLLM, llama.cpp's convert script and the Hub load as published checkpoints are loaded —
//   model.safetensors, or model-0000k-of-0000n.safetensors + model.safetensors.index.json once
//     the weights pass the shard size (HF's sharded layout: {"metadata": {"total_size"},
//     "weight_map": {tensor: file}}), with the published (HF) tensor names, in bf16 or f32;
//   config.json with torch_dtype;
//   the tokenizer files of a source directory, copied byte for byte (tokenizer.json,
//     tokenizer_config.json with its chat_template, chat_template.jinja and
//     special_tokens_map.json when present);
//   generation_config.json (hf_generation_config.h).
// Streamed one tensor at a time from a TensorSource (the 8B seed never exists as a whole f32
// copy); bf16 is round-to-nearest-even (core's conversion), what torch's .to(torch.bfloat16)
// gives for every finite value. Tensors the registry keeps in f32 (LFM2-MoE's expert_bias)
// stay f32, as transformers holds them. The directory is built beside `out` and renamed into
// place, so a failed export leaves nothing behind.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "model/hf_generation_config.h"
#include "model/tensor_source.h"

namespace stoa {

// HF's default max_shard_size ("5GB", decimal).
inline constexpr uint64_t kHfDefaultShardBytes = uint64_t{5'000'000'000};

struct HfExportOptions {
  DType dtype = DType::kBF16;                   // kBF16 or kF32
  uint64_t shard_bytes = kHfDefaultShardBytes;  // 0: always one file
  // Where tokenizer.json and tokenizer_config.json (required), chat_template.jinja,
  // special_tokens_map.json and generation_config.json (optional) are taken from.
  std::string tokenizer_dir;
  std::optional<HfSampling> sampling;  // a run's [sampling]: into generation_config.json
};

struct HfExportResult {
  std::vector<std::string> files;  // written into `out`, sorted
  size_t tensors = 0;
  size_t shards = 1;
  uint64_t tensor_bytes = 0;  // the index's total_size
  // Where the chat template is: "tokenizer_config.json", "chat_template.jinja", both joined by
  // " + ", or "" when the tokenizer has none (a base model's).
  std::string chat_template;
};

// Throws kInvalidArgument for a bad dtype or an `out` that exists and is not an empty directory;
// kNotFound naming the file for a missing tokenizer.json / tokenizer_config.json; kBadFormat for
// a tokenizer whose ids do not fit the model's vocabulary, unreadable JSON, or a non-finite
// weight (naming the tensor and element).
HfExportResult export_hf(const TensorSource& source, const std::string& out,
                         const HfExportOptions& options);

// The shard a tensor goes to, for tensors of `bytes` each in file order: HF's greedy rule — a
// shard is closed when the next tensor would take it past `max_bytes`; a tensor larger than
// that gets a shard of its own. max_bytes 0: everything in shard 0.
std::vector<size_t> plan_hf_shards(const std::vector<uint64_t>& bytes, uint64_t max_bytes);

// "model-00002-of-00005.safetensors".
std::string hf_shard_name(size_t index, size_t count);

}  // namespace stoa
