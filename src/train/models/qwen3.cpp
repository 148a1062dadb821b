// Qwen3 in the trainer: every layer is attention + dense SwiGLU (the qwen3 role table,
// model/arch_qwen3.cpp, names the tensors).
#include "core/error.h"
#include "train/models/policy_layout.h"

namespace stoa::train {

PolicyLayout qwen3_policy_layout(const ModelConfig& c) {
  PolicyLayout out = model_level_layout(c);
  for (int64_t i = 0; i < c.num_layers; ++i) {
    STOA_CHECK(c.is_attention_layer(i), ErrorKind::kBadFormat, "qwen3 has no conv layers (layer ",
               i, ")");
    PolicyLayerLayout layer;
    name_norms(c, i, &layer);
    name_attention(c, i, &layer);
    name_dense_ffn(c, i, &layer);
    out.layers.push_back(std::move(layer));
  }
  return out;
}

}  // namespace stoa::train
