// LFM2-MoE: LFM2's layers, with the dense FFN of layers >= num_dense_layers replaced by a
// sparse MoE (moe.h). Hugging Face names: feed_forward.gate (router), feed_forward.expert_bias,
// feed_forward.experts.{e}.{w1,w3,w2}.
#include "core/error.h"
#include "engine/lfm2.h"

namespace stoa::engine {

std::unique_ptr<Architecture> make_lfm2_moe(const EngineWeights& w) {
  const ModelConfig& c = w.config();
  STOA_CHECK(
      c.num_experts > 0 && c.num_experts_per_tok > 0 && c.num_experts_per_tok <= c.num_experts,
      ErrorKind::kInvalidArgument, "LFM2-MoE needs 0 < num_experts_per_tok (",
      c.num_experts_per_tok, ") <= num_experts (", c.num_experts, ")");
  std::vector<DecoderLayer> layers;
  for (int64_t i = 0; i < c.num_layers; ++i) {
    DecoderLayer layer = bind_lfm2_layer(w, i);
    if (c.is_moe_layer(i)) {
      const std::string p = layer_prefix(i) + "feed_forward.";
      MoeWeights moe;
      moe.router = &w.linear(p + "gate.weight");
      moe.expert_bias = c.use_expert_bias ? w.vec(p + "expert_bias", c.num_experts) : nullptr;
      for (int64_t e = 0; e < c.num_experts; ++e) {
        const std::string ep = cat(p, "experts.", e, ".");
        moe.experts.push_back(bind_swiglu(w, ep + "w1.weight", ep + "w3.weight", ep + "w2.weight"));
      }
      moe.top_k = c.num_experts_per_tok;
      moe.norm_topk_prob = c.norm_topk_prob;
      moe.routed_scaling_factor = c.routed_scaling_factor;
      layer.ffn.moe = std::move(moe);
    }
    layers.push_back(std::move(layer));
  }
  return std::make_unique<Architecture>(std::move(layers), bind_lfm2_final_norm(w), c.hidden_size,
                                        c.rms_norm_eps);
}

}  // namespace stoa::engine
