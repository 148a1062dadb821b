// LFM2 (hybrid): each layer's mixer is a gated short conv or GQA attention (layer_types), the
// feed-forward a dense SwiGLU. The tensors are the roles of the lfm2 table (model/arch_lfm2.cpp).
#include "engine/lfm2.h"

#include "core/error.h"

namespace stoa::engine {

DecoderLayer bind_lfm2_layer(const EngineWeights& w, int64_t i) {
  const ModelConfig& c = w.config();
  DecoderLayer layer = bind_norms(w, i);
  layer.kind = c.is_attention_layer(i) ? LayerKind::kAttention : LayerKind::kConv;
  if (layer.kind == LayerKind::kAttention) {
    layer.attention = bind_attention(w, i);
  } else {
    STOA_CHECK(c.conv_kernel >= 1, ErrorKind::kInvalidArgument,
               "LFM2 conv kernel must be >= 1, got ", c.conv_kernel);
    STOA_CHECK(!c.conv_bias, ErrorKind::kUnsupported, "LFM2 conv with bias is not supported");
    layer.conv.in_proj = &bind_linear(w, TensorRole::kConvInProj, i);
    layer.conv.out_proj = &bind_linear(w, TensorRole::kConvOutProj, i);
    layer.conv.kernel = bind_vector(w, TensorRole::kConvKernel, i);  // [H, 1, L] = [H, L]
    layer.conv.hidden = c.hidden_size;
    layer.conv.kernel_size = c.conv_kernel;
  }
  if (!c.is_moe_layer(i)) layer.ffn.dense = bind_dense_swiglu(w, i);
  return layer;
}

std::unique_ptr<Architecture> make_lfm2(const EngineWeights& w) {
  std::vector<DecoderLayer> layers;
  for (int64_t i = w.span().first; i < w.span().last; ++i) layers.push_back(bind_lfm2_layer(w, i));
  return make_stack(w, std::move(layers));
}

}  // namespace stoa::engine
