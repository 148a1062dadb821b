// The layer stack every supported architecture shares: pre-norm residual blocks
//   h = x + mixer(norm1(x));  out = h + ffn(norm2(h))
// where the mixer is attention or LFM2's short conv and the FFN is dense SwiGLU or MoE. An
// architecture file (qwen3.cpp, lfm2.cpp, lfm2_moe.cpp) only binds its tensor names to these
// slots; adding an architecture of this family is one such file plus a line in
// make_architecture.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "engine/attention.h"
#include "engine/batch.h"
#include "engine/engine_weights.h"
#include "engine/ffn.h"
#include "engine/short_conv.h"

namespace stoa::engine {

struct DecoderLayer {
  LayerKind kind = LayerKind::kAttention;
  const float* mixer_norm = nullptr;  // [hidden]
  const float* ffn_norm = nullptr;    // [hidden]
  AttentionWeights attention;         // kind == kAttention
  ShortConvWeights conv;              // kind == kConv
  FeedForward ffn;
};

class Architecture {
 public:
  Architecture(std::vector<DecoderLayer> layers, const float* final_norm, int64_t hidden,
               double eps)
      : layers_(std::move(layers)), final_norm_(final_norm), hidden_(hidden), eps_(eps) {}
  virtual ~Architecture() = default;

  // Runs every layer over the batch; hidden is [batch.size(), hidden] and is updated in place.
  virtual void forward_layers(const Batch& batch, float* hidden, ThreadPool& pool) const;
  // The final RMSNorm of one token's hidden state.
  void final_norm(const float* x, float* out) const;

  const std::vector<DecoderLayer>& layers() const { return layers_; }

 protected:
  std::vector<DecoderLayer> layers_;
  const float* final_norm_;
  int64_t hidden_;
  double eps_;
};

// Builds the architecture named by weights.config().arch, bound to `weights` (which must
// outlive it and must not move).
std::unique_ptr<Architecture> make_architecture(const EngineWeights& weights);

// Per-architecture binders (one file each).
std::unique_ptr<Architecture> make_qwen3(const EngineWeights& weights);
std::unique_ptr<Architecture> make_lfm2(const EngineWeights& weights);
std::unique_ptr<Architecture> make_lfm2_moe(const EngineWeights& weights);

// Shared binding helpers.
std::string layer_prefix(int64_t layer);  // "model.layers.{layer}."
AttentionWeights bind_attention(const EngineWeights& w, const std::string& prefix,
                                const std::string& q, const std::string& k, const std::string& v,
                                const std::string& o, const std::string& q_norm,
                                const std::string& k_norm);
SwiGluWeights bind_swiglu(const EngineWeights& w, const std::string& gate, const std::string& up,
                          const std::string& down);

}  // namespace stoa::engine
