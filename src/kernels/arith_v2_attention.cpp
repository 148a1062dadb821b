// Engine arithmetic v2's attention for one query (arith_v2.h, docs/design/arithmetic.md): scores
// by the fixed-order dot product, softmax_row, values summed over the keys in order. The signed
// sums use the summand flush, so no partial sum is ever tiny. Compiled with -ffp-contract=off.
#include "kernels/arith_v2.h"
#include "kernels/half.h"

namespace stoa::kernels::v2 {

float dot(const float* a, const float* b, size_t n) {
  // The fixed order of arith_v2_rows.cpp's sums: partial i mod 32, then the tree.
  float s[kSumLanes] = {};
  for (size_t i = 0; i < n; ++i)
    s[i % kSumLanes] = s[i % kSumLanes] + flush_summand(flush(a[i]) * flush(b[i]));
  for (size_t w = kSumLanes / 2; w >= 1; w /= 2)
    for (size_t j = 0; j < w; ++j) s[j] = s[j] + s[j + w];
  return flush(s[0]);  // never tiny (the summand flush); a NaN made canonical
}

void attention_head(const float* q, const float* k, size_t k_stride, const float* v,
                    size_t v_stride, size_t n_keys, size_t head_dim, float scale, float* scores,
                    float* out) {
  for (size_t t = 0; t < n_keys; ++t) scores[t] = flush(dot(q, k + t * k_stride, head_dim) * scale);
  softmax_row(scores, n_keys);
  for (size_t d = 0; d < head_dim; ++d) {
    // Over the keys in order, one chain per output value (v1's attention_values order).
    float acc = 0.0f;
    for (size_t t = 0; t < n_keys; ++t)
      acc = acc + flush_summand(scores[t] * flush(v[t * v_stride + d]));
    out[d] = flush(acc);
  }
}

}  // namespace stoa::kernels::v2
