#include "engine/decoder.h"

#include <vector>

#include "core/error.h"
#include "engine/ops.h"
#include "engine/scratch.h"

namespace stoa::engine {

void Architecture::forward_layers(const Batch& batch, float* hidden, ThreadPool& pool) const {
  const int64_t T = batch.size();
  const int64_t H = hidden_;
  thread_local std::vector<float> normed_buf, delta_buf;
  float* normed = scratch(normed_buf, static_cast<size_t>(T * H));
  float* delta = scratch(delta_buf, static_cast<size_t>(T * H));
  for (size_t li = 0; li < layers_.size(); ++li) {
    const DecoderLayer& layer = layers_[li];
    const int64_t index = static_cast<int64_t>(li);
    for (int64_t t = 0; t < T; ++t) {
      rms_norm(hidden + t * H, layer.mixer_norm, H, eps_, normed + t * H);
    }
    if (layer.kind == LayerKind::kAttention) {
      attention_block(layer.attention, index, batch, normed, delta, pool);
    } else {
      short_conv_block(layer.conv, index, batch, normed, delta, pool);
    }
    for (int64_t i = 0; i < T * H; ++i) hidden[i] += delta[i];
    for (int64_t t = 0; t < T; ++t) {
      rms_norm(hidden + t * H, layer.ffn_norm, H, eps_, normed + t * H);
    }
    layer.ffn.run(normed, T, delta, pool);
    for (int64_t i = 0; i < T * H; ++i) hidden[i] += delta[i];
  }
}

void Architecture::final_norm(const float* x, float* out) const {
  rms_norm(x, final_norm_, hidden_, eps_, out);
}

std::unique_ptr<Architecture> make_architecture(const EngineWeights& weights) {
  switch (weights.config().arch) {
    case Arch::kQwen3:
      return make_qwen3(weights);
    case Arch::kLfm2:
      return make_lfm2(weights);
    case Arch::kLfm2Moe:
      return make_lfm2_moe(weights);
  }
  fail(ErrorKind::kUnsupported, "the engine has no architecture ",
       static_cast<int>(weights.config().arch));
}

std::string layer_prefix(int64_t layer) {
  return cat("model.layers.", layer, ".");
}

AttentionWeights bind_attention(const EngineWeights& w, const std::string& prefix,
                                const std::string& q, const std::string& k, const std::string& v,
                                const std::string& o, const std::string& q_norm,
                                const std::string& k_norm) {
  const ModelConfig& c = w.config();
  STOA_CHECK(c.num_kv_heads > 0 && c.num_heads % c.num_kv_heads == 0, ErrorKind::kInvalidArgument,
             "attention needs num_heads (", c.num_heads, ") divisible by num_kv_heads (",
             c.num_kv_heads, ")");
  STOA_CHECK(c.head_dim % 2 == 0, ErrorKind::kInvalidArgument,
             "rotary embedding needs an even head_dim, got ", c.head_dim);
  AttentionWeights a;
  a.q = &w.linear(prefix + q);
  a.k = &w.linear(prefix + k);
  a.v = &w.linear(prefix + v);
  a.o = &w.linear(prefix + o);
  a.q_norm = w.vec(prefix + q_norm, c.head_dim);
  a.k_norm = w.vec(prefix + k_norm, c.head_dim);
  a.heads = c.num_heads;
  a.kv_heads = c.num_kv_heads;
  a.head_dim = c.head_dim;
  a.eps = c.rms_norm_eps;
  a.rope_theta = c.rope_theta;
  return a;
}

SwiGluWeights bind_swiglu(const EngineWeights& w, const std::string& gate, const std::string& up,
                          const std::string& down) {
  return SwiGluWeights{&w.linear(gate), &w.linear(up), &w.linear(down)};
}

}  // namespace stoa::engine
