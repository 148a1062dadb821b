// The layer stack every supported architecture shares: pre-norm residual blocks
//   h = x + mixer(norm1(x));  out = h + ffn(norm2(h))
// where the mixer is attention or LFM2's short conv and the FFN is dense SwiGLU or MoE. An
// architecture file (qwen3.cpp, lfm2.cpp, lfm2_moe.cpp) only says which blocks each layer has;
// the tensors come by role from the architecture's tensor-role table (model/tensor_roles.h), so
// no binder spells a tensor name. Adding an architecture of this family is one such file plus a
// line in make_architecture.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "engine/attention.h"
#include "engine/batch.h"
#include "engine/engine_weights.h"
#include "engine/ffn.h"
#include "engine/short_conv.h"
#include "model/tensor_roles.h"

namespace stoa::engine {

struct DecoderLayer {
  LayerKind kind = LayerKind::kAttention;
  const float* mixer_norm = nullptr;  // [hidden]
  const float* ffn_norm = nullptr;    // [hidden]
  AttentionWeights attention;         // kind == kAttention
  ShortConvWeights conv;              // kind == kConv
  FeedForward ffn;
};

// Watches a pass between its layers: called after each decoder layer with the count of the model's
// layers done (the layer's index + 1) and the pass's hidden rows [tokens, hidden], in batch order.
// The replay reads a pipeline's stage boundaries with it (roles/verify/replay_blame.h): the rows a
// stage ending there would have sent on. Called on the thread running the pass while the pool's
// workers wait, so it must not use the pool.
using LayerObserver = std::function<void(int64_t layers_done, std::span<const float> hidden)>;

class Architecture {
 public:
  // `layers` are the model's layers first_layer, first_layer + 1, ... (a pipeline stage holds a
  // contiguous span of them); `final_norm` is null on a stage that does not end the model.
  Architecture(std::vector<DecoderLayer> layers, int64_t first_layer, const float* final_norm,
               int64_t hidden, double eps)
      : layers_(std::move(layers)),
        first_layer_(first_layer),
        final_norm_(final_norm),
        hidden_(hidden),
        eps_(eps) {}
  virtual ~Architecture() = default;

  // Runs every layer held over the batch; hidden is [batch.size(), hidden], updated in place.
  // `observer` (may be null) sees the rows after each layer.
  virtual void forward_layers(const Batch& batch, float* hidden, ThreadPool& pool,
                              const LayerObserver* observer = nullptr) const;
  // The final RMSNorm of one token's hidden state.
  void final_norm(const float* x, float* out) const;

  const std::vector<DecoderLayer>& layers() const { return layers_; }

 protected:
  std::vector<DecoderLayer> layers_;
  int64_t first_layer_;
  const float* final_norm_;
  int64_t hidden_;
  double eps_;
};

// Builds the architecture named by weights.config().arch, bound to `weights` (which must
// outlive it and must not move).
std::unique_ptr<Architecture> make_architecture(const EngineWeights& weights);

// Per-architecture binders (one file each), binding the layers of weights.span().
std::unique_ptr<Architecture> make_qwen3(const EngineWeights& weights);
std::unique_ptr<Architecture> make_lfm2(const EngineWeights& weights);
std::unique_ptr<Architecture> make_lfm2_moe(const EngineWeights& weights);

// Shared binding helpers: the tensor of `role` in `layer` (-1: model level), by the table.
// An f32 vector, its element count checked against the table's shape.
const float* bind_vector(const EngineWeights& w, TensorRole role, int64_t layer = -1);
const Linear& bind_linear(const EngineWeights& w, TensorRole role, int64_t layer,
                          int64_t expert = -1);
// A layer whose mixer is attention or whose FFN is dense SwiGLU; the model's final norm.
DecoderLayer bind_norms(const EngineWeights& w, int64_t layer);  // kind kAttention, norms set
AttentionWeights bind_attention(const EngineWeights& w, int64_t layer);
SwiGluWeights bind_dense_swiglu(const EngineWeights& w, int64_t layer);
const float* bind_final_norm(const EngineWeights& w);  // null unless the span ends the model
// The Architecture of `layers` (those of w.span(), in order) with the model's norm settings.
std::unique_ptr<Architecture> make_stack(const EngineWeights& w, std::vector<DecoderLayer> layers);

}  // namespace stoa::engine
