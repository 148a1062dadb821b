// LFM2 and LFM2-MoE in the trainer, one file because they differ only in the table: each
// layer's mixer is attention or the gated short conv (layer_types), its feed-forward dense
// SwiGLU or — LFM2-MoE's layers from num_dense_layers on — the sparse MoE.
#include "train/models/policy_layout.h"

namespace stoa::train {

PolicyLayout lfm2_policy_layout(const ModelConfig& c) {
  PolicyLayout out = model_level_layout(c);
  for (int64_t i = 0; i < c.num_layers; ++i) {
    PolicyLayerLayout layer;
    name_norms(c, i, &layer);
    if (c.is_attention_layer(i)) {
      name_attention(c, i, &layer);
    } else {
      name_short_conv(c, i, &layer);
    }
    if (c.is_moe_layer(i)) {
      name_moe(c, i, &layer);
    } else {
      name_dense_ffn(c, i, &layer);
    }
    out.layers.push_back(std::move(layer));
  }
  return out;
}

}  // namespace stoa::train
