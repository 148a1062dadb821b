// A LoRA adapter as llama.cpp loads one (llama_adapter_lora_init; convert_lora_to_gguf.py makes
// the same from PEFT): a GGUF with general.type = "adapter", adapter.type = "lora",
// adapter.lora.alpha (f32) and general.architecture the base's, and per adapted weight W (its
// GGUF name, e.g. "blk.2.attn_q.weight") the tensors "<name>.lora_a" (ggml ne {in, r}: PEFT's A
// [r, in] as stored) and "<name>.lora_b" (ne {r, out}: PEFT's B [out, r]), in f32. llama.cpp
// then computes W·x + (alpha / r)·B·(A·x) per matrix (llm_graph_context::build_lora_mm), the
// merged model's W + (alpha / r)·B·A.
//
// Only weights that llama.cpp holds as one 2-D matrix take an adapter: it stacks MoE experts into
// one 3-D tensor, so an adapter on an expert matrix is refused (kUnsupported) rather than written
// in a layout llama.cpp would read otherwise.
#pragma once
#include <string>

#include "model/config.h"
#include "model/peft_adapter.h"

namespace stoa {

struct GgufLoraAdapterSummary {
  size_t matrices = 0;  // adapted weights (two tensors each)
  std::string architecture;
};

// Writes `adapter` (PEFT names and shapes, model/peft_adapter.h) for a base of `config` to `path`
// (through PATH.tmp, renamed). Throws kInvalidArgument naming the tensor for a module that is no
// weight of the base or a shape that is not the base's (another base model), kUnsupported for an
// expert matrix.
GgufLoraAdapterSummary export_gguf_lora_adapter(const ModelConfig& config,
                                                const PeftAdapter& adapter, const std::string& path,
                                                const std::string& name = "");

}  // namespace stoa
