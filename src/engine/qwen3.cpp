// Qwen3 (dense): attention in every layer, q/k per-head RMSNorm before RoPE, SwiGLU MLP. The
// tensors are the roles of the qwen3 table (model/arch_qwen3.cpp).
#include "engine/architecture.h"

namespace stoa::engine {

std::unique_ptr<Architecture> make_qwen3(const EngineWeights& w) {
  std::vector<DecoderLayer> layers;
  for (int64_t i = w.span().first; i < w.span().last; ++i) {
    DecoderLayer layer = bind_norms(w, i);
    layer.kind = LayerKind::kAttention;
    layer.attention = bind_attention(w, i);
    layer.ffn.dense = bind_dense_swiglu(w, i);
    layers.push_back(std::move(layer));
  }
  return make_stack(w, std::move(layers));
}

}  // namespace stoa::engine
