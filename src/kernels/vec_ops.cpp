// f32 helpers (see vec_ops.h), compiled per SIMD target by Highway's foreach_target.
//
// One arithmetic on every target (docs/design/kernels.md, "Determinism contract"): every result
// is the same bits on SCALAR, SSE4, AVX2, AVX3 and AVX3_DL. So: no FMA (SSE4 has none; a fused
// multiply-add rounds once, mul + add twice), only Mul/Add/Sub/Div/Sqrt/Min/Max, which IEEE
// rounds alike everywhere; our own exp (FixedExp); and every sum over a vector is kept in a fixed
// span of 32 accumulators (value i goes to accumulator i mod 32 whatever the vector width) that is
// reduced by one fixed tree. Tails go through a zero-padded span so that every element sees the
// same operations as the body.
#include "kernels/vec_ops.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>

#include "kernels/fixed_math.h"
#include "kernels/half.h"
#include "kernels/native_f16.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/vec_ops.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

HWY_BEFORE_NAMESPACE();
namespace stoa::kernels {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

constexpr bool kNativeF16 = STOA_HWY_NATIVE_F16;

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

void RmsNorm(const float* HWY_RESTRICT x, const float* HWY_RESTRICT weight, size_t n, float eps,
             float* out) {
  const float ss = Dot(x, x, n);
  const float inv = 1.0f / std::sqrt(ss / static_cast<float>(n) + eps);
  const DF df;
  const size_t lanes = hn::Lanes(df);
  const auto vinv = hn::Set(df, inv);
  HWY_ALIGN float buf[kMaxLanes];
  size_t i = 0;
  for (; i < n; i += lanes) {
    const size_t rest = n - i;
    auto v = rest >= lanes ? hn::LoadU(df, x + i) : LoadTail(x + i, rest, buf);
    v = hn::Mul(v, vinv);
    if (weight)
      v = hn::Mul(v, rest >= lanes ? hn::LoadU(df, weight + i) : LoadTail(weight + i, rest, buf));
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

void AttentionScores(const float* q, const float* k, size_t k_stride, size_t n_keys,
                     size_t head_dim, float scale, float* out) {
  for (size_t t = 0; t < n_keys; ++t) out[t] = scale * Dot(q, k + t * k_stride, head_dim);
}

// Accumulates vector-wise over keys; each output element's sum runs over t in order.
void AttentionValues(const float* HWY_RESTRICT p, const float* HWY_RESTRICT v, size_t v_stride,
                     size_t n_keys, size_t head_dim, float* HWY_RESTRICT out) {
  const DF df;
  const size_t lanes = hn::Lanes(df);
  HWY_ALIGN float buf[kMaxLanes];
  for (size_t i = 0; i < head_dim; i += 4 * lanes) {
    if (i + 4 * lanes <= head_dim) {
      auto a0 = hn::Zero(df), a1 = hn::Zero(df), a2 = hn::Zero(df), a3 = hn::Zero(df);
      for (size_t t = 0; t < n_keys; ++t) {
        const auto pt = hn::Set(df, p[t]);
        const float* row = v + t * v_stride + i;
        a0 = hn::Add(hn::Mul(pt, hn::LoadU(df, row)), a0);
        a1 = hn::Add(hn::Mul(pt, hn::LoadU(df, row + lanes)), a1);
        a2 = hn::Add(hn::Mul(pt, hn::LoadU(df, row + 2 * lanes)), a2);
        a3 = hn::Add(hn::Mul(pt, hn::LoadU(df, row + 3 * lanes)), a3);
      }
      hn::StoreU(a0, df, out + i);
      hn::StoreU(a1, df, out + i + lanes);
      hn::StoreU(a2, df, out + i + 2 * lanes);
      hn::StoreU(a3, df, out + i + 3 * lanes);
      continue;
    }
    for (size_t j = i; j < head_dim; j += lanes) {
      const size_t rest = head_dim - j;
      auto a = hn::Zero(df);
      for (size_t t = 0; t < n_keys; ++t) {
        const float* row = v + t * v_stride + j;
        a = hn::Add(hn::Mul(hn::Set(df, p[t]),
                            rest >= lanes ? hn::LoadU(df, row) : LoadTail(row, rest, buf)),
                    a);
      }
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

void Softmax(float* x, size_t n) {
  if (n == 0) return;
  const DF df;
  const size_t lanes = hn::Lanes(df);
  HWY_ALIGN float buf[kMaxLanes];
  const auto vsum = hn::Set(df, SumExpShifted(x, n, MaxOf(x, n), x));
  for (size_t i = 0; i < n; i += lanes) {
    const size_t rest = n - i;
    if (rest >= lanes) {
      hn::StoreU(hn::Div(hn::LoadU(df, x + i), vsum), df, x + i);
    } else {
      StoreTail(hn::Div(LoadTail(x + i, rest, buf), vsum), x + i, rest, buf);
    }
  }
}

float LogSumExp(const float* x, size_t n) {
  const float mx = MaxOf(x, n);
  if (mx == -std::numeric_limits<float>::infinity()) return mx;
  // The log is our own (double, then rounded), so the result depends on neither target nor libm.
  return mx + static_cast<float>(fixed_log(static_cast<double>(SumExpShifted(x, n, mx, nullptr))));
}

void SiluMul(const float* gate, const float* up, float* out, size_t n) {
  const DF df;
  const size_t lanes = hn::Lanes(df);
  const auto one = hn::Set(df, 1.0f);
  HWY_ALIGN float bg[kMaxLanes], bu[kMaxLanes];
  for (size_t i = 0; i < n; i += lanes) {
    const size_t rest = n - i;
    const auto g = rest >= lanes ? hn::LoadU(df, gate + i) : LoadTail(gate + i, rest, bg);
    const auto u = rest >= lanes ? hn::LoadU(df, up + i) : LoadTail(up + i, rest, bu);
    const auto e = FixedExp(hn::Neg(g));  // +inf past 88.72: silu is then -0
    const auto r = hn::Mul(hn::Div(g, hn::Add(one, e)), u);
    if (rest >= lanes) {
      hn::StoreU(r, df, out + i);
    } else {
      StoreTail(r, out + i, rest, bg);
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

void F16ToF32(const uint16_t* HWY_RESTRICT in, float* HWY_RESTRICT out, size_t n) {
  const DF df;
  const hn::Rebind<hwy::float16_t, DF> dh;
  const size_t lanes = hn::Lanes(df);
  size_t i = 0;
  for (; kNativeF16 && i + lanes <= n; i += lanes)
    hn::StoreU(hn::PromoteTo(df, hn::LoadU(dh, reinterpret_cast<const hwy::float16_t*>(in + i))),
               df, out + i);
  for (; i < n; ++i) out[i] = f16_bits_to_f32(in[i]);
}

void F32ToF16(const float* HWY_RESTRICT in, uint16_t* HWY_RESTRICT out, size_t n) {
  const DF df;
  const hn::Rebind<hwy::float16_t, DF> dh;
  const size_t lanes = hn::Lanes(df);
  size_t i = 0;
  for (; kNativeF16 && i + lanes <= n; i += lanes)
    hn::StoreU(hn::DemoteTo(dh, hn::LoadU(df, in + i)), dh,
               reinterpret_cast<hwy::float16_t*>(out + i));
  for (; i < n; ++i) out[i] = f32_to_f16_bits(in[i]);
}

void Bf16ToF32(const uint16_t* HWY_RESTRICT in, float* HWY_RESTRICT out, size_t n) {
  const DF df;
  const hn::RebindToUnsigned<DF> du32;
  const hn::Rebind<uint16_t, DF> du16;
  const size_t lanes = hn::Lanes(df);
  size_t i = 0;
  for (; i + lanes <= n; i += lanes) {
    const auto w = hn::ShiftLeft<16>(hn::PromoteTo(du32, hn::LoadU(du16, in + i)));
    hn::StoreU(hn::BitCast(df, w), df, out + i);
  }
  for (; i < n; ++i) out[i] = bf16_bits_to_f32(in[i]);
}

// Round to nearest even on the bit pattern (Highway 1.0's DemoteTo(bf16) truncates).
void F32ToBf16(const float* HWY_RESTRICT in, uint16_t* HWY_RESTRICT out, size_t n) {
  const DF df;
  const hn::RebindToSigned<DF> di32;
  const hn::RebindToUnsigned<DF> du32;
  const hn::Rebind<uint16_t, DF> du16;
  const size_t lanes = hn::Lanes(df);
  const auto bias = hn::Set(du32, 0x7fffu);
  const auto one = hn::Set(du32, 1u);
  const auto quiet = hn::Set(du32, 0x40u);
  size_t i = 0;
  for (; i + lanes <= n; i += lanes) {
    const auto v = hn::LoadU(df, in + i);
    const auto u = hn::BitCast(du32, v);
    const auto rounded =
        hn::ShiftRight<16>(hn::Add(u, hn::Add(bias, hn::And(hn::ShiftRight<16>(u), one))));
    const auto nan = hn::Or(hn::ShiftRight<16>(u), quiet);
    const auto is_nan = hn::RebindMask(du32, hn::IsNaN(v));
    const auto r = hn::IfThenElse(is_nan, nan, rounded);
    hn::StoreU(hn::DemoteTo(du16, hn::BitCast(di32, r)), du16, out + i);
  }
  for (; i < n; ++i) out[i] = f32_to_bf16_bits(in[i]);
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
HWY_EXPORT(Rope);
HWY_EXPORT(F16ToF32);
HWY_EXPORT(F32ToF16);
HWY_EXPORT(Bf16ToF32);
HWY_EXPORT(F32ToBf16);

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
void rope_rotate_half(float* x, size_t n_heads, size_t head_dim, const float* cos,
                      const float* sin) {
  if (head_dim % 2 != 0)
    throw std::invalid_argument("rope_rotate_half: head_dim " + std::to_string(head_dim) +
                                " is odd");
  HWY_DYNAMIC_DISPATCH(Rope)(x, n_heads, head_dim, cos, sin);
}
void convert_f16_to_f32(const uint16_t* in, float* out, size_t n) {
  HWY_DYNAMIC_DISPATCH(F16ToF32)(in, out, n);
}
void convert_f32_to_f16(const float* in, uint16_t* out, size_t n) {
  HWY_DYNAMIC_DISPATCH(F32ToF16)(in, out, n);
}
void convert_bf16_to_f32(const uint16_t* in, float* out, size_t n) {
  HWY_DYNAMIC_DISPATCH(Bf16ToF32)(in, out, n);
}
void convert_f32_to_bf16(const float* in, uint16_t* out, size_t n) {
  HWY_DYNAMIC_DISPATCH(F32ToBf16)(in, out, n);
}

}  // namespace stoa::kernels
#endif  // HWY_ONCE
