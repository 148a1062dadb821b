#include "engine/attention.h"

#include <cmath>
#include <vector>

#include "engine/ops.h"

namespace stoa::engine {

void attend(const float* q, const float* keys, const float* values, int64_t n, int64_t stride,
            int64_t head_dim, float* scores, float* out) {
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(head_dim)));
  for (int64_t j = 0; j < n; ++j) scores[j] = dot_f32(q, keys + j * stride, head_dim) * scale;
  softmax(scores, n);
  for (int64_t d = 0; d < head_dim; ++d) out[d] = 0;
  for (int64_t j = 0; j < n; ++j) {
    const float* v = values + j * stride;
    const float p = scores[j];
    for (int64_t d = 0; d < head_dim; ++d) out[d] += p * v[d];
  }
}

void attention_block(const AttentionWeights& w, int64_t layer, const Batch& batch, const float* x,
                     float* out, ThreadPool& pool) {
  const int64_t T = batch.size();
  const int64_t hd = w.head_dim;
  const int64_t q_dim = w.heads * hd;
  const int64_t kv_dim = w.kv_heads * hd;
  const int64_t group = w.heads / w.kv_heads;

  std::vector<float> q(static_cast<size_t>(T * q_dim));
  std::vector<float> k(static_cast<size_t>(T * kv_dim));
  std::vector<float> v(static_cast<size_t>(T * kv_dim));
  w.q->forward(x, T, q.data(), pool);
  w.k->forward(x, T, k.data(), pool);
  w.v->forward(x, T, v.data(), pool);

  for (int64_t t = 0; t < T; ++t) {
    const int64_t pos = batch.positions[static_cast<size_t>(t)];
    for (int64_t h = 0; h < w.heads; ++h) {
      float* head = q.data() + t * q_dim + h * hd;
      rms_norm(head, w.q_norm, hd, w.eps, head);
      rope_rotate_half(head, hd, pos, w.rope_theta);
    }
    for (int64_t h = 0; h < w.kv_heads; ++h) {
      float* head = k.data() + t * kv_dim + h * hd;
      rms_norm(head, w.k_norm, hd, w.eps, head);
      rope_rotate_half(head, hd, pos, w.rope_theta);
    }
  }

  // Write the new keys/values into their sequences' caches first, so a token attends to the
  // tokens before it in the same segment exactly as it would to earlier, cached ones.
  for (const BatchSegment& seg : batch.segments) {
    Sequence::LayerState& state = seg.seq->layer(layer);
    const int64_t start = seg.start_position();
    state.keys.resize(static_cast<size_t>((start + seg.count) * kv_dim));
    state.values.resize(static_cast<size_t>((start + seg.count) * kv_dim));
    std::copy(k.begin() + seg.offset * kv_dim, k.begin() + (seg.offset + seg.count) * kv_dim,
              state.keys.begin() + start * kv_dim);
    std::copy(v.begin() + seg.offset * kv_dim, v.begin() + (seg.offset + seg.count) * kv_dim,
              state.values.begin() + start * kv_dim);
  }

  std::vector<float> ctx(static_cast<size_t>(T * q_dim));
  std::vector<const BatchSegment*> seg_of(static_cast<size_t>(T));
  for (const BatchSegment& seg : batch.segments) {
    for (int64_t i = 0; i < seg.count; ++i) seg_of[static_cast<size_t>(seg.offset + i)] = &seg;
  }
  const int tasks = pool.size();
  const int64_t items = T * w.heads;
  pool.run(tasks, [&](int task) {
    std::vector<float> scores;
    for (int64_t item = task; item < items; item += tasks) {
      const int64_t t = item / w.heads;
      const int64_t h = item % w.heads;
      const Sequence::LayerState& state = seg_of[static_cast<size_t>(t)]->seq->layer(layer);
      const int64_t n = batch.positions[static_cast<size_t>(t)] + 1;
      scores.resize(static_cast<size_t>(n));
      const int64_t kvh = h / group;
      attend(q.data() + t * q_dim + h * hd, state.keys.data() + kvh * hd,
             state.values.data() + kvh * hd, n, kv_dim, hd, scores.data(),
             ctx.data() + t * q_dim + h * hd);
    }
  });
  w.o->forward(ctx.data(), T, out, pool);
}

}  // namespace stoa::engine
