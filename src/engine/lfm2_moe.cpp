// LFM2-MoE: LFM2's layers, with the dense FFN of layers >= num_dense_layers replaced by a
// sparse MoE (moe.h): the router, routing bias and experts of the lfm2_moe table.
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
  for (int64_t i = w.span().first; i < w.span().last; ++i) {
    DecoderLayer layer = bind_lfm2_layer(w, i);
    if (c.is_moe_layer(i)) {
      MoeWeights moe;
      moe.router = &bind_linear(w, TensorRole::kRouter, i);
      moe.expert_bias = has_tensor(c, TensorRole::kExpertBias, i)
                            ? bind_vector(w, TensorRole::kExpertBias, i)
                            : nullptr;
      for (int64_t e = 0; e < c.num_experts; ++e) {
        moe.experts.push_back(SwiGluWeights{&bind_linear(w, TensorRole::kExpertGate, i, e),
                                            &bind_linear(w, TensorRole::kExpertUp, i, e),
                                            &bind_linear(w, TensorRole::kExpertDown, i, e)});
      }
      moe.top_k = c.num_experts_per_tok;
      moe.norm_topk_prob = c.norm_topk_prob;
      moe.routed_scaling_factor = c.routed_scaling_factor;
      layer.ffn.moe = std::move(moe);
    }
    layers.push_back(std::move(layer));
  }
  return make_stack(w, std::move(layers));
}

}  // namespace stoa::engine
