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
#include "kernels/span-inl.h"

HWY_BEFORE_NAMESPACE();
namespace stoa::kernels {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

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

// RoPE in engine arithmetic v2 (v2::rope_apply, head by head): x1' = flush(fs(x1 * c) -
// fs(x2 * s)), x2' = flush(fs(x2 * c) + fs(x1 * s)), every input flushed, fs the summand flush.
// The tail goes through zero-padded vectors: every element sees the body's operations.
void Rope(float* x, size_t n_heads, size_t head_dim, const float* cos, const float* sin) {
  const DF df;
  const size_t lanes = hn::Lanes(df);
  const size_t half = head_dim / 2;
  HWY_ALIGN float b1[kMaxLanes], b2[kMaxLanes], bc[kMaxLanes], bs[kMaxLanes];
  for (size_t h = 0; h < n_heads; ++h) {
    float* v = x + h * head_dim;
    for (size_t i = 0; i < half; i += lanes) {
      const size_t rest = half - i;
      const bool full = rest >= lanes;
      const auto x1 = v2v::Flush(df, full ? hn::LoadU(df, v + i) : LoadTail(v + i, rest, b1));
      const auto x2 =
          v2v::Flush(df, full ? hn::LoadU(df, v + half + i) : LoadTail(v + half + i, rest, b2));
      const auto c = v2v::Flush(df, full ? hn::LoadU(df, cos + i) : LoadTail(cos + i, rest, bc));
      const auto s = v2v::Flush(df, full ? hn::LoadU(df, sin + i) : LoadTail(sin + i, rest, bs));
      const auto r1 = v2v::Flush(df, hn::Sub(v2v::FlushSummand(df, hn::Mul(x1, c)),
                                             v2v::FlushSummand(df, hn::Mul(x2, s))));
      const auto r2 = v2v::Flush(df, hn::Add(v2v::FlushSummand(df, hn::Mul(x2, c)),
                                             v2v::FlushSummand(df, hn::Mul(x1, s))));
      if (full) {
        hn::StoreU(r1, df, v + i);
        hn::StoreU(r2, df, v + half + i);
      } else {
        StoreTail(r1, v + i, rest, b1);
        StoreTail(r2, v + half + i, rest, b2);
      }
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
