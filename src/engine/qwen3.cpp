// Qwen3 (dense): attention in every layer, q/k per-head RMSNorm before RoPE, SwiGLU MLP.
// Hugging Face names: input_layernorm, self_attn.{q,k,v,o}_proj, self_attn.{q,k}_norm,
// post_attention_layernorm, mlp.{gate,up,down}_proj; final model.norm.
#include "engine/decoder.h"

namespace stoa::engine {

std::unique_ptr<Architecture> make_qwen3(const EngineWeights& w) {
  const ModelConfig& c = w.config();
  std::vector<DecoderLayer> layers;
  for (int64_t i = 0; i < c.num_layers; ++i) {
    const std::string p = layer_prefix(i);
    DecoderLayer layer;
    layer.kind = LayerKind::kAttention;
    layer.mixer_norm = w.vec(p + "input_layernorm.weight", c.hidden_size);
    layer.ffn_norm = w.vec(p + "post_attention_layernorm.weight", c.hidden_size);
    layer.attention = bind_attention(w, p, "self_attn.q_proj.weight", "self_attn.k_proj.weight",
                                     "self_attn.v_proj.weight", "self_attn.o_proj.weight",
                                     "self_attn.q_norm.weight", "self_attn.k_norm.weight");
    layer.ffn.dense = bind_swiglu(w, p + "mlp.gate_proj.weight", p + "mlp.up_proj.weight",
                                  p + "mlp.down_proj.weight");
    layers.push_back(std::move(layer));
  }
  return std::make_unique<Architecture>(
      std::move(layers), w.vec("model.norm.weight", c.hidden_size), c.hidden_size, c.rms_norm_eps);
}

}  // namespace stoa::engine
