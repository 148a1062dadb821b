// LFM2 (hybrid): each layer's mixer is a gated short conv or GQA attention (layer_types).
// Hugging Face names: operator_norm, ffn_norm, conv.{in_proj,conv,out_proj},
// self_attn.{q,k,v}_proj, self_attn.out_proj, self_attn.{q,k}_layernorm,
// feed_forward.{w1 (gate), w3 (up), w2 (down)}; final model.embedding_norm.
#include "engine/lfm2.h"

#include "core/error.h"

namespace stoa::engine {

DecoderLayer bind_lfm2_layer(const EngineWeights& w, int64_t i) {
  const ModelConfig& c = w.config();
  const std::string p = layer_prefix(i);
  DecoderLayer layer;
  layer.kind = c.is_attention_layer(i) ? LayerKind::kAttention : LayerKind::kConv;
  layer.mixer_norm = w.vec(p + "operator_norm.weight", c.hidden_size);
  layer.ffn_norm = w.vec(p + "ffn_norm.weight", c.hidden_size);
  if (layer.kind == LayerKind::kAttention) {
    layer.attention =
        bind_attention(w, p, "self_attn.q_proj.weight", "self_attn.k_proj.weight",
                       "self_attn.v_proj.weight", "self_attn.out_proj.weight",
                       "self_attn.q_layernorm.weight", "self_attn.k_layernorm.weight");
  } else {
    STOA_CHECK(c.conv_kernel >= 1, ErrorKind::kInvalidArgument,
               "LFM2 conv kernel must be >= 1, got ", c.conv_kernel);
    STOA_CHECK(!c.conv_bias, ErrorKind::kUnsupported, "LFM2 conv with bias is not supported");
    layer.conv.in_proj = &w.linear(p + "conv.in_proj.weight");
    layer.conv.out_proj = &w.linear(p + "conv.out_proj.weight");
    layer.conv.kernel = w.vec(p + "conv.conv.weight", c.hidden_size * c.conv_kernel);
    layer.conv.hidden = c.hidden_size;
    layer.conv.kernel_size = c.conv_kernel;
  }
  if (!c.is_moe_layer(i)) {
    layer.ffn.dense = bind_swiglu(w, p + "feed_forward.w1.weight", p + "feed_forward.w3.weight",
                                  p + "feed_forward.w2.weight");
  }
  return layer;
}

const float* bind_lfm2_final_norm(const EngineWeights& w) {
  return w.vec("model.embedding_norm.weight", w.config().hidden_size);
}

std::unique_ptr<Architecture> make_lfm2(const EngineWeights& w) {
  const ModelConfig& c = w.config();
  std::vector<DecoderLayer> layers;
  for (int64_t i = 0; i < c.num_layers; ++i) layers.push_back(bind_lfm2_layer(w, i));
  return std::make_unique<Architecture>(std::move(layers), bind_lfm2_final_norm(w), c.hidden_size,
                                        c.rms_norm_eps);
}

}  // namespace stoa::engine
