#include "engine/architecture.h"

#include <vector>

#include "core/error.h"
#include "engine/ops.h"
#include "engine/pass_workers.h"
#include "engine/scratch.h"
#include "kernels/vec_ops.h"

namespace stoa::engine {

namespace {

// The pass's rows normed over the pool (each row by one thread: the same bits).
void norm_rows_over(const float* x, const float* weight, int64_t rows, int64_t hidden, double eps,
                    float* out, ThreadPool& pool) {
  parallel_chunks(pool, rows, 8, 1, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t)
      rms_norm(x + t * hidden, weight, hidden, eps, out + t * hidden);
  });
}

// The residual add over the pool (element-wise: the same bits however it is split).
void add_residual(float* hidden, const float* delta, int64_t n, ThreadPool& pool) {
  parallel_chunks(pool, n, 32768, 16, [&](int64_t begin, int64_t end) {
    kernels::residual_add(hidden + begin, delta + begin, static_cast<size_t>(end - begin));
  });
}

}  // namespace

void Architecture::forward_layers(const Batch& batch, float* hidden, ThreadPool& pool,
                                  const LayerObserver* observer) const {
  const int64_t T = batch.size();
  const int64_t H = hidden_;
  thread_local std::vector<float> normed_buf, delta_buf;
  float* normed = scratch(normed_buf, static_cast<size_t>(T * H));
  float* delta = scratch(delta_buf, static_cast<size_t>(T * H));
  for (size_t li = 0; li < layers_.size(); ++li) {
    const DecoderLayer& layer = layers_[li];
    const int64_t index = first_layer_ + static_cast<int64_t>(li);
    norm_rows_over(hidden, layer.mixer_norm, T, H, eps_, normed, pool);
    if (layer.kind == LayerKind::kAttention) {
      attention_block(layer.attention, index, batch, normed, delta, pool);
    } else {
      short_conv_block(layer.conv, index, batch, normed, delta, pool);
    }
    add_residual(hidden, delta, T * H, pool);
    norm_rows_over(hidden, layer.ffn_norm, T, H, eps_, normed, pool);
    layer.ffn.run(normed, T, delta, pool);
    add_residual(hidden, delta, T * H, pool);
    if (observer != nullptr) (*observer)(index + 1, {hidden, static_cast<size_t>(T * H)});
  }
}

void Architecture::final_norm(const float* x, float* out) const {
  STOA_CHECK(final_norm_ != nullptr, ErrorKind::kInternal,
             "final norm asked of a stage that does not end the model");
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

const float* bind_vector(const EngineWeights& w, TensorRole role, int64_t layer) {
  TensorSlot slot = tensor_slot(w.config(), role, layer);
  return w.vec(slot.name, shape_numel(slot.shape));
}

const Linear& bind_linear(const EngineWeights& w, TensorRole role, int64_t layer, int64_t expert) {
  return w.linear(tensor_name(w.config(), role, layer, expert));
}

DecoderLayer bind_norms(const EngineWeights& w, int64_t layer) {
  DecoderLayer out;
  out.mixer_norm = bind_vector(w, TensorRole::kMixerNorm, layer);
  out.ffn_norm = bind_vector(w, TensorRole::kFfnNorm, layer);
  return out;
}

AttentionWeights bind_attention(const EngineWeights& w, int64_t layer) {
  const ModelConfig& c = w.config();
  STOA_CHECK(c.num_kv_heads > 0 && c.num_heads % c.num_kv_heads == 0, ErrorKind::kInvalidArgument,
             "attention needs num_heads (", c.num_heads, ") divisible by num_kv_heads (",
             c.num_kv_heads, ")");
  STOA_CHECK(c.head_dim % 2 == 0, ErrorKind::kInvalidArgument,
             "rotary embedding needs an even head_dim, got ", c.head_dim);
  AttentionWeights a;
  a.q = &bind_linear(w, TensorRole::kAttnQ, layer);
  a.k = &bind_linear(w, TensorRole::kAttnK, layer);
  a.v = &bind_linear(w, TensorRole::kAttnV, layer);
  a.o = &bind_linear(w, TensorRole::kAttnOut, layer);
  a.q_norm = bind_vector(w, TensorRole::kAttnQNorm, layer);
  a.k_norm = bind_vector(w, TensorRole::kAttnKNorm, layer);
  a.heads = c.num_heads;
  a.kv_heads = c.num_kv_heads;
  a.head_dim = c.head_dim;
  a.eps = c.rms_norm_eps;
  a.rope_theta = c.rope_theta;
  return a;
}

SwiGluWeights bind_dense_swiglu(const EngineWeights& w, int64_t layer) {
  return SwiGluWeights{&bind_linear(w, TensorRole::kFfnGate, layer),
                       &bind_linear(w, TensorRole::kFfnUp, layer),
                       &bind_linear(w, TensorRole::kFfnDown, layer)};
}

const float* bind_final_norm(const EngineWeights& w) {
  return w.span().heads(w.config()) ? bind_vector(w, TensorRole::kFinalNorm) : nullptr;
}

std::unique_ptr<Architecture> make_stack(const EngineWeights& w, std::vector<DecoderLayer> layers) {
  const ModelConfig& c = w.config();
  STOA_CHECK(static_cast<int64_t>(layers.size()) == w.span().size(), ErrorKind::kInternal, "bound ",
             layers.size(), " layers for ", span_string(c, w.span()));
  return std::make_unique<Architecture>(std::move(layers), w.span().first, bind_final_norm(w),
                                        c.hidden_size, c.rms_norm_eps);
}

}  // namespace stoa::engine
