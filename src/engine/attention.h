// Grouped-query attention with per-head q/k RMSNorm before RoPE (Qwen3, LFM2). Query head h
// reads kv head h / (heads / kv_heads), the layout of Hugging Face's repeat_kv.
#pragma once
#include <cstdint>
#include <limits>

#include "core/thread_pool.h"
#include "engine/batch.h"
#include "engine/linear.h"

namespace stoa::engine {

struct AttentionWeights {
  const Linear* q = nullptr;  // [heads * head_dim, hidden]
  const Linear* k = nullptr;  // [kv_heads * head_dim, hidden]
  const Linear* v = nullptr;
  const Linear* o = nullptr;      // [hidden, heads * head_dim]
  const float* q_norm = nullptr;  // [head_dim]
  const float* k_norm = nullptr;
  int64_t heads = 0;
  int64_t kv_heads = 0;
  int64_t head_dim = 0;
  double eps = 1e-6;
  double rope_theta = 1e6;
};

// Appends the batch's keys and values to each sequence's cache of `layer`, then writes the
// attention output for every token (causal: token at position p sees positions 0..p).
// x and out are [batch.size(), hidden].
void attention_block(const AttentionWeights& w, int64_t layer, const Batch& batch, const float* x,
                     float* out, ThreadPool& pool);

// The attention core alone, for one query head over a run of cached keys/values: returns the
// softmax-weighted sum of `values` into out[head_dim]. Keys/values rows have stride `stride`.
// key_floor / value_floor: lower bounds on the nonzero magnitudes of the keys / values, or 0;
// value_ceiling: an upper bound on the values' magnitudes, or +inf (Sequence::LayerState; they
// change the work, never the bits).
void attend(const float* q, const float* keys, const float* values, int64_t n, int64_t stride,
            int64_t head_dim, float* scores, float* out, float key_floor = 0.0f,
            float value_floor = 0.0f, float value_ceiling = std::numeric_limits<float>::infinity());

}  // namespace stoa::engine
