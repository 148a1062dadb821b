#include "engine/attention.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "engine/ops.h"
#include "engine/pass_workers.h"
#include "engine/scratch.h"
#include "kernels/vec_ops.h"

namespace stoa::engine {

void attend(const float* q, const float* keys, const float* values, int64_t n, int64_t stride,
            int64_t head_dim, float* scores, float* out, float key_floor, float value_floor,
            float value_ceiling) {
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(head_dim)));
  // SIMD kernels; each (token, head) is computed alone, so the result does not depend on the
  // rest of the batch or on which thread runs it.
  const auto n_keys = static_cast<size_t>(n);
  const auto hd = static_cast<size_t>(head_dim);
  kernels::attention_scores(q, keys, static_cast<size_t>(stride), n_keys, hd, scale, scores,
                            key_floor);
  kernels::softmax(scores, n_keys);
  kernels::attention_values(scores, values, static_cast<size_t>(stride), n_keys, hd, out,
                            value_floor, value_ceiling);
}

void attention_block(const AttentionWeights& w, int64_t layer, const Batch& batch, const float* x,
                     float* out, ThreadPool& pool) {
  const int64_t T = batch.size();
  const int64_t hd = w.head_dim;
  const int64_t q_dim = w.heads * hd;
  const int64_t kv_dim = w.kv_heads * hd;
  const int64_t group = w.heads / w.kv_heads;

  thread_local std::vector<float> q_buf, k_buf, v_buf, ctx_buf;
  thread_local std::vector<const BatchSegment*> seg_buf;
  float* q = scratch(q_buf, static_cast<size_t>(T * q_dim));
  float* k = scratch(k_buf, static_cast<size_t>(T * kv_dim));
  float* v = scratch(v_buf, static_cast<size_t>(T * kv_dim));
  {
    // One quantisation of x and one parallel operation for all three projections.
    const Linear* qkv[3] = {w.q, w.k, w.v};
    float* outs[3] = {q, k, v};
    Linear::forward_group(qkv, x, T, outs, pool);
  }

  // One position's rotation angles serve all its heads (the pow/sincos dominated this loop).
  thread_local std::vector<float> cos_buf, sin_buf;
  const int64_t half = hd / 2;
  float* cos_all = scratch(cos_buf, static_cast<size_t>(T * half));
  float* sin_all = scratch(sin_buf, static_cast<size_t>(T * half));
  // Keys here (the cache needs them before any token attends); each query head is normed and
  // rotated by the task that attends with it, below (the same operations, spread over the pool).
  // Token by token over the pool (each token's angles and keys by one thread: the same bits).
  parallel_chunks(pool, T, 2, 1, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      const int64_t pos = batch.positions[static_cast<size_t>(t)];
      float* cs = cos_all + t * half;
      float* sn = sin_all + t * half;
      rope_angles(hd, pos, w.rope_theta, cs, sn);
      for (int64_t h = 0; h < w.kv_heads; ++h) {
        float* head = k + t * kv_dim + h * hd;
        rms_norm(head, w.k_norm, hd, w.eps, head);
        rope_apply(head, hd, cs, sn);
      }
    }
  });

  // Write the new keys/values into their sequences' caches first, so a token attends to the
  // tokens before it in the same segment exactly as it would to earlier, cached ones.
  for (const BatchSegment& seg : batch.segments) {
    Sequence::LayerState& state = seg.seq->layer(layer);
    const int64_t start = seg.start_position();
    state.keys.resize(static_cast<size_t>((start + seg.count) * kv_dim));
    state.values.resize(static_cast<size_t>((start + seg.count) * kv_dim));
    std::copy(k + seg.offset * kv_dim, k + (seg.offset + seg.count) * kv_dim,
              state.keys.begin() + start * kv_dim);
    std::copy(v + seg.offset * kv_dim, v + (seg.offset + seg.count) * kv_dim,
              state.values.begin() + start * kv_dim);
    const auto n_new = static_cast<size_t>(seg.count * kv_dim);
    state.key_floor =
        std::min(state.key_floor, kernels::min_nonzero_magnitude(k + seg.offset * kv_dim, n_new));
    state.value_floor =
        std::min(state.value_floor, kernels::min_nonzero_magnitude(v + seg.offset * kv_dim, n_new));
    state.value_ceiling =
        std::max(state.value_ceiling, kernels::max_magnitude(v + seg.offset * kv_dim, n_new));
  }

  float* ctx = scratch(ctx_buf, static_cast<size_t>(T * q_dim));
  const BatchSegment** seg_of = scratch(seg_buf, static_cast<size_t>(T));
  for (const BatchSegment& seg : batch.segments) {
    for (int64_t i = 0; i < seg.count; ++i) seg_of[seg.offset + i] = &seg;
  }
  // One task item per (token, KV head): the query heads sharing that KV head run back to back
  // on one thread, so its keys and values come from that core's cache after the first head
  // (with items per query head, both cores pulled every KV head through their caches).
  const int tasks = pool.size();
  const int64_t items = T * w.kv_heads;
  parallel_run(pool, tasks, [&](int task) {
    thread_local std::vector<float> scores_buf;
    for (int64_t item = task; item < items; item += tasks) {
      const int64_t t = item / w.kv_heads;
      const int64_t kvh = item % w.kv_heads;
      const Sequence::LayerState& state = seg_of[t]->seq->layer(layer);
      const int64_t n = batch.positions[static_cast<size_t>(t)] + 1;
      float* scores = scratch(scores_buf, static_cast<size_t>(n));
      for (int64_t h = kvh * group; h < (kvh + 1) * group; ++h) {
        float* qh = q + t * q_dim + h * hd;
        rms_norm(qh, w.q_norm, hd, w.eps, qh);
        rope_apply(qh, hd, cos_all + t * half, sin_all + t * half);
        attend(qh, state.keys.data() + kvh * hd, state.values.data() + kvh * hd, n, kv_dim, hd,
               scores, ctx + t * q_dim + h * hd, state.key_floor, state.value_floor,
               state.value_ceiling);
      }
    }
  });
  w.o->forward(ctx, T, out, pool);
}

}  // namespace stoa::engine
