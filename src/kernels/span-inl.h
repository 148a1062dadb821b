// The fixed-span f32 helpers of the SIMD kernels (kernels.md, "Determinism contract"): the vector
// tag, zero-padded tails, and the span of 32 partial sums reduced by one fixed tree — the order
// every sum over a vector keeps on every target. Included inside each Highway target of
// vec_ops.cpp and attention_v2.cpp (the -inl.h convention: the guard toggles per target).
#if defined(STOA_KERNELS_SPAN_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef STOA_KERNELS_SPAN_INL_H_
#undef STOA_KERNELS_SPAN_INL_H_
#else
#define STOA_KERNELS_SPAN_INL_H_
#endif

#include <cstring>

#include <hwy/highway.h>

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

}  // namespace HWY_NAMESPACE
}  // namespace stoa::kernels
HWY_AFTER_NAMESPACE();

#endif  // STOA_KERNELS_SPAN_INL_H_
