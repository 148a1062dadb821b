// Attention in engine arithmetic v2 (docs/design/arithmetic.md, v2::attention_head), compiled
// per SIMD target by Highway's foreach_target: the scores (v2::dot per key, scaled, flushed),
// the softmax row and the values' sums in key order — the same bits as kernels::v2 on every
// target. Only Add/Sub/Mul (-ffp-contract=off), v2's exp and reciprocal, the fixed span.
#include <cmath>
#include <cstring>
#include <limits>

#include "kernels/arith_v2.h"
#include "kernels/vec_ops.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/attention_v2.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "kernels/arith_v2-inl.h"
#include "kernels/span-inl.h"

HWY_BEFORE_NAMESPACE();
namespace stoa::kernels {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Engine arithmetic v2's dot product (v2::dot) on flushed inputs (v2::flush(x) == x, as the
// engine's queries and cached keys are: RoPE's outputs): every product summand-flushed (or, with
// kFlush false, where no product can lie in (0, 2^-100), added as it is: the same terms), the
// fixed span; the caller flushes the sum. Not flushing the inputs again saves two thirds of the
// work of attention's inner loop.
template <bool kFlush>
HWY_INLINE void DotSpanV2(const float* HWY_RESTRICT a, const float* HWY_RESTRICT b, VF* acc) {
  const DF df;
  for (size_t v = 0; v < kSpanVecs; ++v) {
    const VF p = hn::Mul(hn::LoadU(df, a + v * kLanes), hn::LoadU(df, b + v * kLanes));
    acc[v] = hn::Add(acc[v], kFlush ? v2v::FlushSummand(df, p) : p);
  }
}

template <bool kFlush>
HWY_INLINE float DotV2(const float* HWY_RESTRICT a, const float* HWY_RESTRICT b, size_t n) {
  const DF df;
  VF acc[kSpanVecs];
  for (size_t v = 0; v < kSpanVecs; ++v) acc[v] = hn::Zero(df);
  size_t i = 0;
  for (; i + kSpan <= n; i += kSpan) DotSpanV2<kFlush>(a + i, b + i, acc);
  if (i < n) {
    HWY_ALIGN float ba[kSpan] = {}, bb[kSpan] = {};
    std::memcpy(ba, a + i, (n - i) * sizeof(float));
    std::memcpy(bb, b + i, (n - i) * sizeof(float));
    DotSpanV2<kFlush>(ba, bb, acc);
  }
  return SumOfSpan(acc);  // AttentionScores flushes it
}

// True when |a| * |b| >= 2^-100 (exact in double: two 24-bit significands): a rounded product of
// values at least that large in magnitude never lies in (0, 2^-100), where v2 flushes a summand.
HWY_INLINE bool ProductsClearOfFlush(float a, float b) {
  return static_cast<double>(a) * static_cast<double>(b) >= 0x1p-100;
}

// A sum term is zero or at least 2^-100 in magnitude when both factors' nonzero magnitudes are
// at least the floors: the summand flush cannot change a term, so the loops skip it. Adding a
// zero term instead of +0 changes nothing either (a running sum from +0 is never -0).
void AttentionScores(const float* q, const float* k, size_t k_stride, size_t n_keys,
                     size_t head_dim, float scale, float* out, float key_floor) {
  if (ProductsClearOfFlush(min_nonzero_magnitude(q, head_dim), key_floor)) {
    for (size_t t = 0; t < n_keys; ++t) out[t] = DotV2<false>(q, k + t * k_stride, head_dim);
  } else {
    for (size_t t = 0; t < n_keys; ++t) out[t] = DotV2<true>(q, k + t * k_stride, head_dim);
  }
  // flush(flush(sum) * scale), a vector of keys at a time.
  const DF df;
  const size_t lanes = hn::Lanes(df);
  const VF vscale = hn::Set(df, scale);
  HWY_ALIGN float buf[kMaxLanes];
  for (size_t t = 0; t < n_keys; t += lanes) {
    const size_t rest = n_keys - t;
    const VF raw = rest >= lanes ? hn::LoadU(df, out + t) : LoadTail(out + t, rest, buf);
    const VF scaled = v2v::Flush(df, hn::Mul(v2v::Flush(df, raw), vscale));
    if (rest >= lanes) {
      hn::StoreU(scaled, df, out + t);
    } else {
      StoreTail(scaled, out + t, rest, buf);
    }
  }
}

// Accumulates vector-wise over keys; each output element's sum runs over t in order, every term
// flush_summand(p[t] * flush(v)), the result flushed (v2::attention_head's values). With every
// |v| finite (value_ceiling), a key whose p[t] is zero adds only zero terms (skipped); one with
// p[t] * value_floor >= 2^-100 adds its products unflushed (the same terms).
void AttentionValues(const float* HWY_RESTRICT p, const float* HWY_RESTRICT v, size_t v_stride,
                     size_t n_keys, size_t head_dim, float* HWY_RESTRICT out, float value_floor,
                     float value_ceiling) {
  const bool skip_zero_p = value_ceiling < std::numeric_limits<float>::infinity();
  const DF df;
  const size_t lanes = hn::Lanes(df);
  HWY_ALIGN float buf[kMaxLanes];
  // values flushed (the W8A8 outputs)
  const auto term = [&](bool flush, VF pt, VF values) {
    const VF prod = hn::Mul(pt, values);
    return flush ? v2v::FlushSummand(df, prod) : prod;
  };
  for (size_t i = 0; i < head_dim; i += 4 * lanes) {
    if (i + 4 * lanes <= head_dim) {
      auto a0 = hn::Zero(df), a1 = hn::Zero(df), a2 = hn::Zero(df), a3 = hn::Zero(df);
      for (size_t t = 0; t < n_keys; ++t) {
        if (skip_zero_p && p[t] == 0.0f) continue;
        const bool flush = !ProductsClearOfFlush(p[t], value_floor);
        const auto pt = hn::Set(df, p[t]);
        const float* row = v + t * v_stride + i;
        a0 = hn::Add(a0, term(flush, pt, hn::LoadU(df, row)));
        a1 = hn::Add(a1, term(flush, pt, hn::LoadU(df, row + lanes)));
        a2 = hn::Add(a2, term(flush, pt, hn::LoadU(df, row + 2 * lanes)));
        a3 = hn::Add(a3, term(flush, pt, hn::LoadU(df, row + 3 * lanes)));
      }
      hn::StoreU(v2v::Flush(df, a0), df, out + i);
      hn::StoreU(v2v::Flush(df, a1), df, out + i + lanes);
      hn::StoreU(v2v::Flush(df, a2), df, out + i + 2 * lanes);
      hn::StoreU(v2v::Flush(df, a3), df, out + i + 3 * lanes);
      continue;
    }
    for (size_t j = i; j < head_dim; j += lanes) {
      const size_t rest = head_dim - j;
      auto a = hn::Zero(df);
      for (size_t t = 0; t < n_keys; ++t) {
        if (skip_zero_p && p[t] == 0.0f) continue;
        const float* row = v + t * v_stride + j;
        a = hn::Add(a, term(!ProductsClearOfFlush(p[t], value_floor), hn::Set(df, p[t]),
                            rest >= lanes ? hn::LoadU(df, row) : LoadTail(row, rest, buf)));
      }
      a = v2v::Flush(df, a);
      if (rest >= lanes) {
        hn::StoreU(a, df, out + j);
      } else {
        StoreTail(a, out + j, rest, buf);
      }
    }
    break;
  }
}

// Engine arithmetic v2's softmax row (v2::softmax_row): inputs flushed; a NaN, or no finite
// maximum, makes the row NaN; e = v2 exp(x - max) summed in the fixed span; one v2::recip of the
// sum; out = flush(e * inv).
HWY_INLINE void ExpSpanV2(const float* x, VF vm, VF* acc, float* out) {
  const DF df;
  for (size_t v = 0; v < kSpanVecs; ++v) {
    const VF e = v2v::Exp(df, hn::Sub(hn::LoadU(df, x + v * kLanes), vm));
    hn::StoreU(e, df, out + v * kLanes);
    acc[v] = hn::Add(acc[v], e);
  }
}

void Softmax(float* x, size_t n) {
  if (n == 0) return;
  const DF df;
  const size_t lanes = hn::Lanes(df);
  HWY_ALIGN float buf[kMaxLanes];
  auto vmax = hn::Set(df, -std::numeric_limits<float>::infinity());
  auto any_nan = hn::FirstN(df, 0);
  for (size_t i = 0; i < n; i += lanes) {
    const size_t rest = n - i;
    // The tail is padded with -inf, which neither raises the maximum nor is a NaN.
    if (rest < lanes)
      for (size_t j = 0; j < lanes; ++j) buf[j] = -std::numeric_limits<float>::infinity();
    const VF v = v2v::Flush(
        df, rest >= lanes ? hn::LoadU(df, x + i) : [&] {
          std::memcpy(buf, x + i, rest * sizeof(float));
          return hn::Load(df, buf);
        }());
    any_nan = hn::Or(any_nan, v2v::IsNan(df, v));
    vmax = hn::Max(vmax, hn::IfThenElse(v2v::IsNan(df, v), vmax, v));
    if (rest >= lanes) {
      hn::StoreU(v, df, x + i);
    } else {
      StoreTail(v, x + i, rest, buf);
    }
  }
  const float mx = hn::GetLane(hn::MaxOfLanes(df, vmax));
  if (!hn::AllFalse(df, any_nan) || !(mx > -std::numeric_limits<float>::infinity() &&
                                      mx < std::numeric_limits<float>::infinity())) {
    for (size_t i = 0; i < n; ++i) x[i] = v2::flush(std::numeric_limits<float>::quiet_NaN());
    return;
  }
  const VF vm = hn::Set(df, mx);
  VF acc[kSpanVecs];
  for (size_t v = 0; v < kSpanVecs; ++v) acc[v] = hn::Zero(df);
  size_t i = 0;
  for (; i + kSpan <= n; i += kSpan) ExpSpanV2(x + i, vm, acc, x + i);
  if (i < n) {
    // Padding of -inf: its exp is +0, so the pad adds +0 to its partial sums on every target.
    HWY_ALIGN float bx[kSpan], be[kSpan];
    for (size_t j = 0; j < kSpan; ++j) bx[j] = -std::numeric_limits<float>::infinity();
    std::memcpy(bx, x + i, (n - i) * sizeof(float));
    ExpSpanV2(bx, vm, acc, be);
    std::memcpy(x + i, be, (n - i) * sizeof(float));
  }
  const auto vinv = hn::Set(df, v2::recip(SumOfSpan(acc)));
  for (i = 0; i < n; i += lanes) {
    const size_t rest = n - i;
    if (rest >= lanes) {
      hn::StoreU(v2v::Flush(df, hn::Mul(hn::LoadU(df, x + i), vinv)), df, x + i);
    } else {
      StoreTail(v2v::Flush(df, hn::Mul(LoadTail(x + i, rest, buf), vinv)), x + i, rest, buf);
    }
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace stoa::kernels
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace stoa::kernels {

HWY_EXPORT(AttentionScores);
HWY_EXPORT(AttentionValues);
HWY_EXPORT(Softmax);

void attention_scores(const float* q, const float* k, size_t k_stride, size_t n_keys,
                      size_t head_dim, float scale, float* out, float key_floor) {
  HWY_DYNAMIC_DISPATCH(AttentionScores)(q, k, k_stride, n_keys, head_dim, scale, out, key_floor);
}
void attention_values(const float* p, const float* v, size_t v_stride, size_t n_keys,
                      size_t head_dim, float* out, float value_floor, float value_ceiling) {
  HWY_DYNAMIC_DISPATCH(AttentionValues)
  (p, v, v_stride, n_keys, head_dim, out, value_floor, value_ceiling);
}
void softmax(float* x, size_t n) {
  HWY_DYNAMIC_DISPATCH(Softmax)(x, n);
}

float min_nonzero_magnitude(const float* x, size_t n) {
  // On |x|'s bits minus one, unsigned: a zero wraps to the largest value and drops out of the
  // minimum, NaN and infinity are above every finite value. Branch-free, so it vectorises.
  uint32_t least = 0x7f800000u - 1u;
  for (size_t i = 0; i < n; ++i) {
    uint32_t bits;
    std::memcpy(&bits, x + i, sizeof bits);
    const uint32_t m = (bits & 0x7fffffffu) - 1u;
    least = m < least ? m : least;
  }
  const uint32_t out_bits = least + 1u;
  float out;
  std::memcpy(&out, &out_bits, sizeof out);
  return out;
}

float max_magnitude(const float* x, size_t n) {
  // On |x|'s bits: a NaN's are above infinity's, and any bits from infinity's up mean +inf.
  uint32_t most = 0;
  for (size_t i = 0; i < n; ++i) {
    uint32_t bits;
    std::memcpy(&bits, x + i, sizeof bits);
    const uint32_t m = bits & 0x7fffffffu;
    most = m > most ? m : most;
  }
  if (most >= 0x7f800000u) return std::numeric_limits<float>::infinity();
  float out;
  std::memcpy(&out, &most, sizeof out);
  return out;
}

}  // namespace stoa::kernels
#endif  // HWY_ONCE
