// f32 helpers (see vec_ops.h), compiled per SIMD target by Highway's foreach_target.
//
// One arithmetic on every target (docs/design/kernels.md, "Determinism contract"): every result
// is the same bits on SCALAR, SSE4, AVX2, AVX3 and AVX3_DL. So: no FMA (SSE4 has none; a fused
// multiply-add rounds once, mul + add twice), only Mul/Add/Sub/Div/Sqrt/Min/Max, which IEEE
// rounds alike everywhere; our own exp (FixedExp); and every sum over a vector is kept in a fixed
// span of 32 accumulators (value i goes to accumulator i mod 32 whatever the vector width) that is
// reduced by one fixed tree. Tails go through a zero-padded span so that every element sees the
// same operations as the body. The kernels of a forward pass compute engine arithmetic v2
// (docs/design/arithmetic.md) through arith_v2-inl.h: no division, v2's exp and flushes, the same
// bits as the scalar reference kernels::v2.
#include "kernels/vec_ops.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>

#include "kernels/arith_v2.h"
#include "kernels/fixed_math.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/vec_ops.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "kernels/arith_v2-inl.h"

HWY_BEFORE_NAMESPACE();
namespace stoa::kernels {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using DF = hn::CappedTag<float, 16>;
using VF = hn::Vec<DF>;
constexpr size_t kMaxLanes = HWY_MAX_BYTES / sizeof(float);
constexpr size_t kLanes = hn::MaxLanes(DF());
// The accumulation span: a sum over values keeps 32 partial sums on every target (2 vectors on
// AVX-512, 4 on AVX2, 8 on SSE4, 32 scalars), enough independent adds to hide their latency.
constexpr size_t kSpan = 32;
constexpr size_t kSpanVecs = kSpan / kLanes;
static_assert(kSpan % kLanes == 0, "the span is a whole number of vectors");

// Copies the last `rest` (< lanes) values into a zero-padded aligned buffer.
HWY_INLINE VF LoadTail(const float* HWY_RESTRICT p, size_t rest, float* buf) {
  const DF df;
  hn::Store(hn::Zero(df), df, buf);
  std::memcpy(buf, p, rest * sizeof(float));
  return hn::Load(df, buf);
}

HWY_INLINE void StoreTail(VF v, float* p, size_t rest, float* buf) {
  const DF df;
  hn::Store(v, df, buf);
  std::memcpy(p, buf, rest * sizeof(float));
}

// Within one vector: lanes j and j + half added, halving until 4 lanes, then (s0 + s2) + (s1 + s3)
// — the tail of the fixed tree, in registers (a store and 31 scalar adds cost attention ~25 %).
#if HWY_TARGET == HWY_SCALAR
template <class D>
HWY_INLINE float TreeSum(D, hn::Vec<D> v) {
  return hn::GetLane(v);  // one lane: the span's 32 scalars were already summed across
}
#else
template <class D>
HWY_INLINE float TreeSum(D d, hn::Vec<D> v) {
  if constexpr (hn::MaxLanes(D()) > 4) {
    const hn::Half<D> dh;
    return TreeSum(dh, hn::Add(hn::LowerHalf(dh, v), hn::UpperHalf(dh, v)));
  } else {
    static_assert(hn::MaxLanes(D()) == 4, "vectors of 4, 8 or 16 lanes");
    HWY_ALIGN float s[4];
    hn::Store(v, d, s);
    return (s[0] + s[2]) + (s[1] + s[3]);
  }
}
#endif

// The sum of the span's 32 partial sums by one fixed tree: s[j] += s[j + w] for w = 16, 8, .., 1
// (across the span's vectors while w spans whole vectors, then inside one). Overwrites acc.
HWY_INLINE float SumOfSpan(VF* acc) {
  for (size_t w = kSpanVecs / 2; w >= 1; w /= 2)
    for (size_t v = 0; v < w; ++v) acc[v] = hn::Add(acc[v], acc[v + w]);
  return TreeSum(DF(), acc[0]);
}

// e^x by Cephes expf's polynomial, evaluated with Mul/Add/Sub only: the same bits on every
// target (Highway's Exp uses FMA where the target has it). Relative error about 2 ulp. Results
// below 2^-126 (x < -87.5) are flushed to 0, and -inf and NaN give 0; x > 88.72 gives +inf.
HWY_INLINE VF FixedExp(VF x) {
  const DF df;
  const hn::RebindToSigned<DF> di;
  const VF lo = hn::Set(df, -87.5f), hi = hn::Set(df, 88.72f);
  const VF xc = hn::Min(hn::Max(x, lo), hi);
  // n = round(x / ln 2) by the 1.5 * 2^23 shifter (ties to even, no rounding-mode dependence).
  const VF shifter = hn::Set(df, 12582912.0f);
  const VF n = hn::Sub(hn::Add(hn::Mul(xc, hn::Set(df, 1.44269504088896341f)), shifter), shifter);
  // r = x - n ln 2, ln 2 in two parts (n * 0.693359375 is exact).
  const VF r = hn::Sub(hn::Sub(xc, hn::Mul(n, hn::Set(df, 0.693359375f))),
                       hn::Mul(n, hn::Set(df, -2.12194440e-4f)));
  VF p = hn::Set(df, 1.9875691500e-4f);
  p = hn::Add(hn::Mul(p, r), hn::Set(df, 1.3981999507e-3f));
  p = hn::Add(hn::Mul(p, r), hn::Set(df, 8.3334519073e-3f));
  p = hn::Add(hn::Mul(p, r), hn::Set(df, 4.1665795894e-2f));
  p = hn::Add(hn::Mul(p, r), hn::Set(df, 1.6666665459e-1f));
  p = hn::Add(hn::Mul(p, r), hn::Set(df, 5.0000001201e-1f));
  p = hn::Add(hn::Add(hn::Mul(hn::Mul(p, r), r), r), hn::Set(df, 1.0f));
  // p * 2^n in two exact power-of-two factors (n reaches 128, past one factor's range).
  const auto ni = hn::ConvertTo(di, n);
  const auto half = hn::ShiftRight<1>(ni);
  const auto bias = hn::Set(di, 127);
  const VF s1 = hn::BitCast(df, hn::ShiftLeft<23>(hn::Add(half, bias)));
  const VF s2 = hn::BitCast(df, hn::ShiftLeft<23>(hn::Add(hn::Sub(ni, half), bias)));
  const VF y = hn::Mul(hn::Mul(p, s1), s2);
  return hn::IfThenElse(hn::Gt(x, hi), hn::Set(df, std::numeric_limits<float>::infinity()),
                        hn::IfThenElseZero(hn::Ge(x, lo), y));
}

// The span accumulation of a dot product: products rounded, then added (no FMA).
HWY_INLINE void DotSpan(const float* HWY_RESTRICT a, const float* HWY_RESTRICT b, VF* acc) {
  const DF df;
  for (size_t v = 0; v < kSpanVecs; ++v)
    acc[v] = hn::Add(acc[v], hn::Mul(hn::LoadU(df, a + v * kLanes), hn::LoadU(df, b + v * kLanes)));
}

HWY_INLINE float Dot(const float* HWY_RESTRICT a, const float* HWY_RESTRICT b, size_t n) {
  const DF df;
  VF acc[kSpanVecs];
  for (size_t v = 0; v < kSpanVecs; ++v) acc[v] = hn::Zero(df);
  size_t i = 0;
  for (; i + kSpan <= n; i += kSpan) DotSpan(a + i, b + i, acc);
  if (i < n) {
    HWY_ALIGN float ba[kSpan] = {}, bb[kSpan] = {};
    std::memcpy(ba, a + i, (n - i) * sizeof(float));
    std::memcpy(bb, b + i, (n - i) * sizeof(float));
    DotSpan(ba, bb, acc);
  }
  return SumOfSpan(acc);
}

float DotF32(const float* a, const float* b, size_t n) {
  return Dot(a, b, n);
}

// Engine arithmetic v2's RMSNorm row (v2::rmsnorm_row): the sum of flush(x^2) in the fixed
// span, mean = flush(ss * recip(n)), r = rsqrt(mean + eps), out = flush(flush(x * r) * w).
void RmsNorm(const float* HWY_RESTRICT x, const float* HWY_RESTRICT weight, size_t n, float eps,
             float* out) {
  const DF df;
  VF acc[kSpanVecs];
  for (size_t v = 0; v < kSpanVecs; ++v) acc[v] = hn::Zero(df);
  const auto square_span = [&](const float* p) {
    for (size_t v = 0; v < kSpanVecs; ++v) {
      const VF t = v2v::FlushTiny(df, hn::LoadU(df, p + v * kLanes));
      acc[v] = hn::Add(acc[v], v2v::FlushTiny(df, hn::Mul(t, t)));
    }
  };
  size_t i = 0;
  for (; i + kSpan <= n; i += kSpan) square_span(x + i);
  if (i < n) {
    HWY_ALIGN float bx[kSpan] = {};
    std::memcpy(bx, x + i, (n - i) * sizeof(float));
    square_span(bx);
  }
  const float mean = v2::flush(SumOfSpan(acc) * v2::recip(static_cast<float>(n)));
  const auto vr = hn::Set(df, v2::rsqrt(mean + eps));
  const size_t lanes = hn::Lanes(df);
  HWY_ALIGN float buf[kMaxLanes];
  for (i = 0; i < n; i += lanes) {
    const size_t rest = n - i;
    auto v = rest >= lanes ? hn::LoadU(df, x + i) : LoadTail(x + i, rest, buf);
    v = v2v::Flush(df, hn::Mul(v2v::FlushTiny(df, v), vr));
    if (weight)
      v = v2v::Flush(df, hn::Mul(v, rest >= lanes ? hn::LoadU(df, weight + i)
                                                  : LoadTail(weight + i, rest, buf)));
    if (rest >= lanes) {
      hn::StoreU(v, df, out + i);
    } else {
      StoreTail(v, out + i, rest, buf);
    }
  }
}

void Axpy(float alpha, const float* HWY_RESTRICT x, float* HWY_RESTRICT y, size_t n) {
  const DF df;
  const size_t lanes = hn::Lanes(df);
  const auto va = hn::Set(df, alpha);
  size_t i = 0;
  for (; i + lanes <= n; i += lanes)
    hn::StoreU(hn::Add(hn::Mul(va, hn::LoadU(df, x + i)), hn::LoadU(df, y + i)), df, y + i);
  if (i < n) {
    HWY_ALIGN float bx[kMaxLanes], by[kMaxLanes];
    const auto r = hn::Add(hn::Mul(va, LoadTail(x + i, n - i, bx)), LoadTail(y + i, n - i, by));
    StoreTail(r, y + i, n - i, by);
  }
}

// Engine arithmetic v2's dot product (v2::dot) on flushed inputs (v2::flush(x) == x, as the
// engine's queries and cached keys are: RoPE's outputs): every product summand-flushed, the
// fixed span, the result flushed. Not flushing the inputs again saves two thirds of the work
// of attention's inner loop.
HWY_INLINE void DotSpanV2(const float* HWY_RESTRICT a, const float* HWY_RESTRICT b, VF* acc) {
  const DF df;
  for (size_t v = 0; v < kSpanVecs; ++v) {
    const VF x = hn::LoadU(df, a + v * kLanes), y = hn::LoadU(df, b + v * kLanes);
    acc[v] = hn::Add(acc[v], v2v::FlushSummand(df, hn::Mul(x, y)));
  }
}

HWY_INLINE float DotV2(const float* HWY_RESTRICT a, const float* HWY_RESTRICT b, size_t n) {
  const DF df;
  VF acc[kSpanVecs];
  for (size_t v = 0; v < kSpanVecs; ++v) acc[v] = hn::Zero(df);
  size_t i = 0;
  for (; i + kSpan <= n; i += kSpan) DotSpanV2(a + i, b + i, acc);
  if (i < n) {
    HWY_ALIGN float ba[kSpan] = {}, bb[kSpan] = {};
    std::memcpy(ba, a + i, (n - i) * sizeof(float));
    std::memcpy(bb, b + i, (n - i) * sizeof(float));
    DotSpanV2(ba, bb, acc);
  }
  return v2::flush(SumOfSpan(acc));
}

void AttentionScores(const float* q, const float* k, size_t k_stride, size_t n_keys,
                     size_t head_dim, float scale, float* out) {
  for (size_t t = 0; t < n_keys; ++t)
    out[t] = v2::flush(DotV2(q, k + t * k_stride, head_dim) * scale);
}

// Accumulates vector-wise over keys; each output element's sum runs over t in order, every term
// flush_summand(p[t] * flush(v)), the result flushed (v2::attention_head's values).
void AttentionValues(const float* HWY_RESTRICT p, const float* HWY_RESTRICT v, size_t v_stride,
                     size_t n_keys, size_t head_dim, float* HWY_RESTRICT out) {
  const DF df;
  const size_t lanes = hn::Lanes(df);
  HWY_ALIGN float buf[kMaxLanes];
  const auto term = [&](VF pt, VF values) {
    return v2v::FlushSummand(df, hn::Mul(pt, values));  // values flushed (the W8A8 outputs)
  };
  for (size_t i = 0; i < head_dim; i += 4 * lanes) {
    if (i + 4 * lanes <= head_dim) {
      auto a0 = hn::Zero(df), a1 = hn::Zero(df), a2 = hn::Zero(df), a3 = hn::Zero(df);
      for (size_t t = 0; t < n_keys; ++t) {
        const auto pt = hn::Set(df, p[t]);
        const float* row = v + t * v_stride + i;
        a0 = hn::Add(a0, term(pt, hn::LoadU(df, row)));
        a1 = hn::Add(a1, term(pt, hn::LoadU(df, row + lanes)));
        a2 = hn::Add(a2, term(pt, hn::LoadU(df, row + 2 * lanes)));
        a3 = hn::Add(a3, term(pt, hn::LoadU(df, row + 3 * lanes)));
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
        const float* row = v + t * v_stride + j;
        a = hn::Add(a, term(hn::Set(df, p[t]),
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

// The largest of x[0..n); -inf when n == 0.
HWY_INLINE float MaxOf(const float* HWY_RESTRICT x, size_t n) {
  const DF df;
  const size_t lanes = hn::Lanes(df);
  auto vmax = hn::Set(df, -std::numeric_limits<float>::infinity());
  size_t i = 0;
  for (; i + lanes <= n; i += lanes) vmax = hn::Max(vmax, hn::LoadU(df, x + i));
  float mx = hn::GetLane(hn::MaxOfLanes(df, vmax));
  for (; i < n; ++i) mx = std::max(mx, x[i]);
  return mx;
}

// The sum of exp(x[i] - mx) over x[0..n) in the fixed span; where `out` is given, each exp is
// also stored there (Softmax's numerators, written over its input). -inf inputs give 0.
HWY_INLINE void ExpSpan(const float* x, VF vm, VF* acc, float* out) {
  const DF df;
  for (size_t v = 0; v < kSpanVecs; ++v) {
    const VF e = FixedExp(hn::Sub(hn::LoadU(df, x + v * kLanes), vm));
    if (out != nullptr) hn::StoreU(e, df, out + v * kLanes);
    acc[v] = hn::Add(acc[v], e);
  }
}

HWY_INLINE float SumExpShifted(const float* x, size_t n, float mx, float* out) {
  const DF df;
  const VF vm = hn::Set(df, mx);
  VF acc[kSpanVecs];
  for (size_t v = 0; v < kSpanVecs; ++v) acc[v] = hn::Zero(df);
  size_t i = 0;
  for (; i + kSpan <= n; i += kSpan) ExpSpan(x + i, vm, acc, out ? out + i : nullptr);
  if (i < n) {
    // Padding of -inf: its exp is 0, so the pad adds +0 to its accumulators on every target.
    HWY_ALIGN float bx[kSpan], be[kSpan];
    for (size_t j = 0; j < kSpan; ++j) bx[j] = -std::numeric_limits<float>::infinity();
    std::memcpy(bx, x + i, (n - i) * sizeof(float));
    ExpSpan(bx, vm, acc, be);
    if (out != nullptr) std::memcpy(out + i, be, (n - i) * sizeof(float));
  }
  return SumOfSpan(acc);
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

float LogSumExp(const float* x, size_t n) {
  const float mx = MaxOf(x, n);
  if (mx == -std::numeric_limits<float>::infinity()) return mx;
  // The log is our own (double, then rounded), so the result depends on neither target nor libm.
  return mx + static_cast<float>(fixed_log(static_cast<double>(SumExpShifted(x, n, mx, nullptr))));
}

// SwiGLU in engine arithmetic v2 (v2::silu_mul): flush(silu(g) * flush(u)), silu by v2's exp
// and division.
void SiluMul(const float* gate, const float* up, float* out, size_t n) {
  const DF df;
  const size_t lanes = hn::Lanes(df);
  HWY_ALIGN float bg[kMaxLanes], bu[kMaxLanes];
  for (size_t i = 0; i < n; i += lanes) {
    const size_t rest = n - i;
    const auto g = rest >= lanes ? hn::LoadU(df, gate + i) : LoadTail(gate + i, rest, bg);
    const auto u = rest >= lanes ? hn::LoadU(df, up + i) : LoadTail(up + i, rest, bu);
    const auto r = v2v::Flush(df, hn::Mul(v2v::Silu(df, g), v2v::FlushTiny(df, u)));
    if (rest >= lanes) {
      hn::StoreU(r, df, out + i);
    } else {
      StoreTail(r, out + i, rest, bg);
    }
  }
}

// v2::add per element (the residual stream).
void ResidualAdd(float* HWY_RESTRICT y, const float* HWY_RESTRICT delta, size_t n) {
  const DF df;
  const size_t lanes = hn::Lanes(df);
  HWY_ALIGN float by[kMaxLanes], bd[kMaxLanes];
  for (size_t i = 0; i < n; i += lanes) {
    const size_t rest = n - i;
    const auto a = rest >= lanes ? hn::LoadU(df, y + i) : LoadTail(y + i, rest, by);
    const auto b = rest >= lanes ? hn::LoadU(df, delta + i) : LoadTail(delta + i, rest, bd);
    const auto r = v2v::Flush(df, hn::Add(v2v::FlushSummand(df, a), v2v::FlushSummand(df, b)));
    if (rest >= lanes) {
      hn::StoreU(r, df, y + i);
    } else {
      StoreTail(r, y + i, rest, by);
    }
  }
}

// v2::moe_mix: out += flush_summand(w * flush(y)), flushed.
void MixAdd(float w, const float* HWY_RESTRICT y, float* HWY_RESTRICT out, size_t n) {
  const DF df;
  const size_t lanes = hn::Lanes(df);
  const auto vw = hn::Set(df, v2::flush(w));
  HWY_ALIGN float by[kMaxLanes], bo[kMaxLanes];
  for (size_t i = 0; i < n; i += lanes) {
    const size_t rest = n - i;
    const auto v = rest >= lanes ? hn::LoadU(df, y + i) : LoadTail(y + i, rest, by);
    const auto o = rest >= lanes ? hn::LoadU(df, out + i) : LoadTail(out + i, rest, bo);
    const auto r =
        v2v::Flush(df, hn::Add(o, v2v::FlushSummand(df, hn::Mul(vw, v2v::FlushTiny(df, v)))));
    if (rest >= lanes) {
      hn::StoreU(r, df, out + i);
    } else {
      StoreTail(r, out + i, rest, bo);
    }
  }
}

// flush(flush(a) * flush(b)): a product that is not summed (LFM2's conv gates).
void MulFlush(const float* a, const float* b, float* out, size_t n) {
  const DF df;
  const size_t lanes = hn::Lanes(df);
  HWY_ALIGN float ba[kMaxLanes], bb[kMaxLanes];
  for (size_t i = 0; i < n; i += lanes) {
    const size_t rest = n - i;
    const auto x = rest >= lanes ? hn::LoadU(df, a + i) : LoadTail(a + i, rest, ba);
    const auto y = rest >= lanes ? hn::LoadU(df, b + i) : LoadTail(b + i, rest, bb);
    const auto r = v2v::Flush(df, hn::Mul(v2v::FlushTiny(df, x), v2v::FlushTiny(df, y)));
    if (rest >= lanes) {
      hn::StoreU(r, df, out + i);
    } else {
      StoreTail(r, out + i, rest, ba);
    }
  }
}

void Rope(float* x, size_t n_heads, size_t head_dim, const float* cos, const float* sin) {
  const DF df;
  const size_t lanes = hn::Lanes(df);
  const size_t half = head_dim / 2;
  for (size_t h = 0; h < n_heads; ++h) {
    float* v = x + h * head_dim;
    size_t i = 0;
    for (; i + lanes <= half; i += lanes) {
      const auto x1 = hn::LoadU(df, v + i), x2 = hn::LoadU(df, v + half + i);
      const auto c = hn::LoadU(df, cos + i), s = hn::LoadU(df, sin + i);
      hn::StoreU(hn::Sub(hn::Mul(x1, c), hn::Mul(x2, s)), df, v + i);
      hn::StoreU(hn::Add(hn::Mul(x2, c), hn::Mul(x1, s)), df, v + half + i);
    }
    for (; i < half; ++i) {  // same rounding as the vector body: products first, then the sum
      const float x1 = v[i], x2 = v[half + i];
      const float a = x1 * cos[i], b = x2 * sin[i], c = x2 * cos[i], d = x1 * sin[i];
      v[i] = a - b;
      v[half + i] = c + d;
    }
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace stoa::kernels
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace stoa::kernels {

HWY_EXPORT(DotF32);
HWY_EXPORT(RmsNorm);
HWY_EXPORT(Axpy);
HWY_EXPORT(AttentionScores);
HWY_EXPORT(AttentionValues);
HWY_EXPORT(Softmax);
HWY_EXPORT(SiluMul);
HWY_EXPORT(LogSumExp);
HWY_EXPORT(ResidualAdd);
HWY_EXPORT(MixAdd);
HWY_EXPORT(MulFlush);
HWY_EXPORT(Rope);

void rmsnorm(const float* x, const float* weight, size_t n, float eps, float* out) {
  if (n == 0) return;
  HWY_DYNAMIC_DISPATCH(RmsNorm)(x, weight, n, eps, out);
}
float dot(const float* a, const float* b, size_t n) {
  return HWY_DYNAMIC_DISPATCH(DotF32)(a, b, n);
}
void axpy(float alpha, const float* x, float* y, size_t n) {
  HWY_DYNAMIC_DISPATCH(Axpy)(alpha, x, y, n);
}
void attention_scores(const float* q, const float* k, size_t k_stride, size_t n_keys,
                      size_t head_dim, float scale, float* out) {
  HWY_DYNAMIC_DISPATCH(AttentionScores)(q, k, k_stride, n_keys, head_dim, scale, out);
}
void attention_values(const float* p, const float* v, size_t v_stride, size_t n_keys,
                      size_t head_dim, float* out) {
  HWY_DYNAMIC_DISPATCH(AttentionValues)(p, v, v_stride, n_keys, head_dim, out);
}
void softmax(float* x, size_t n) {
  HWY_DYNAMIC_DISPATCH(Softmax)(x, n);
}
float logsumexp(const float* x, size_t n) {
  if (n == 0) throw std::invalid_argument("logsumexp: empty input");
  return HWY_DYNAMIC_DISPATCH(LogSumExp)(x, n);
}
void silu_mul(const float* gate, const float* up, float* out, size_t n) {
  HWY_DYNAMIC_DISPATCH(SiluMul)(gate, up, out, n);
}
void residual_add(float* y, const float* delta, size_t n) {
  HWY_DYNAMIC_DISPATCH(ResidualAdd)(y, delta, n);
}
void mix_add(float w, const float* y, float* out, size_t n) {
  HWY_DYNAMIC_DISPATCH(MixAdd)(w, y, out, n);
}
void mul_flush(const float* a, const float* b, float* out, size_t n) {
  HWY_DYNAMIC_DISPATCH(MulFlush)(a, b, out, n);
}
void rope_rotate_half(float* x, size_t n_heads, size_t head_dim, const float* cos,
                      const float* sin) {
  if (head_dim % 2 != 0)
    throw std::invalid_argument("rope_rotate_half: head_dim " + std::to_string(head_dim) +
                                " is odd");
  HWY_DYNAMIC_DISPATCH(Rope)(x, n_heads, head_dim, cos, sin);
}
}  // namespace stoa::kernels
#endif  // HWY_ONCE
