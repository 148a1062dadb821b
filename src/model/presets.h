// Named model configs: tiny ones for tests and the llama.cpp oracle, bench-sized ones, the CPU
// demo model, and real shapes (LFM2-350M, LFM2-8B-A1B, Qwen3-0.6B) for reference and size math.
// Every hidden and FFN width is a multiple of 32, the int8 grid's group size.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "model/config.h"

namespace stoa {

struct PresetInfo {
  std::string name;
  std::string description;
};

const std::vector<PresetInfo>& model_presets();
// Throws kNotFound naming the preset and listing the known ones.
ModelConfig preset_config(const std::string& name);

// The builders the presets are made with, for configs of other sizes (`stoa bench train`).
// Qwen3: every layer attention; rms eps 1e-6.
ModelConfig qwen3_config(int64_t vocab, int64_t hidden, int64_t ffn, int64_t layers, int64_t heads,
                         int64_t kv_heads, int64_t head_dim, bool tied);
// LFM2: conv layers but those listed in `attention`; head_dim hidden / heads; rms eps 1e-5; tied.
ModelConfig lfm2_config(int64_t vocab, int64_t hidden, int64_t ffn, int64_t layers, int64_t heads,
                        int64_t kv_heads, std::vector<int64_t> attention);
// An LFM2 config made MoE: `experts` of width `expert_ffn`, top-k routing (normalised, with the
// expert bias), the first `dense_layers` dense.
ModelConfig lfm2_moe_config(ModelConfig lfm2, int64_t experts, int64_t top_k, int64_t dense_layers,
                            int64_t expert_ffn);

}  // namespace stoa
