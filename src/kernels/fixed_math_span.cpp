// See fixed_math_span.h. Compiled per SIMD target by Highway's foreach_target, with
// -ffp-contract=off (kernels/CMakeLists.txt): each lane is fixed_exp's sequence — Mul, Add, Sub,
// Min/Max on in-range values, integer work on the exponent bits — which IEEE rounds alike on
// every target; Highway's own Exp is not used (it fuses where the target has FMA).
#include "kernels/fixed_math_span.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include "kernels/fixed_math.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/fixed_math_span.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

HWY_BEFORE_NAMESPACE();
namespace stoa::kernels {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
namespace fm = fixed_math_detail;

using DD = hn::CappedTag<double, 8>;
using VD = hn::Vec<DD>;
constexpr size_t kLanes = hn::MaxLanes(DD());
// The accumulation span: 32 partial sums on every target (4 vectors on AVX-512, 8 on AVX2, 16
// on SSE4 and NEON, 32 scalars).
constexpr size_t kSpan = 32;
constexpr size_t kSpanVecs = kSpan / kLanes;
static_assert(kSpan % kLanes == 0, "the span is a whole number of vectors");

// fixed_exp (fixed_math.cpp) lane by lane: the same operations in the same order, so the same
// bits. Out-of-range lanes are computed on a clamped value and replaced at the end.
HWY_INLINE VD FixedExpD(VD x) {
  const DD dd;
  const hn::RebindToSigned<DD> di;
  const VD lo = hn::Set(dd, fm::kExpLo), hi = hn::Set(dd, fm::kExpHi);
  const VD xc = hn::Min(hn::Max(x, lo), hi);
  const VD shifter = hn::Set(dd, fm::kShifter);
  const VD n = hn::Sub(hn::Add(hn::Mul(xc, hn::Set(dd, fm::kInvLn2)), shifter), shifter);
  const VD r = hn::Sub(hn::Sub(xc, hn::Mul(n, hn::Set(dd, fm::kLn2Hi))),
                       hn::Mul(n, hn::Set(dd, fm::kLn2Lo)));
  VD p = hn::Set(dd, fm::kExpTaylor[0]);
  for (size_t k = 1; k < fm::kExpTaylor.size(); ++k)
    p = hn::Add(hn::Mul(p, r), hn::Set(dd, fm::kExpTaylor[k]));
  const VD max_n = hn::Set(dd, 1023.0);
  const VD extra = hn::IfThenElse(hn::Gt(n, max_n), hn::Set(dd, 2.0), hn::Set(dd, 1.0));
  // 2^min(n, 1023) from the exponent bits: n + shifter holds n in its low mantissa bits.
  const auto ni =
      hn::Sub(hn::BitCast(di, hn::Add(hn::Min(n, max_n), shifter)), hn::BitCast(di, shifter));
  const VD scale = hn::BitCast(dd, hn::ShiftLeft<52>(hn::Add(ni, hn::Set(di, 1023))));
  VD y = hn::Mul(hn::Mul(p, extra), scale);
  y = hn::IfThenElseZero(hn::Ge(x, lo), y);
  y = hn::IfThenElse(hn::Gt(x, hi), hn::Set(dd, std::numeric_limits<double>::infinity()), y);
  return hn::IfThenElse(hn::IsNaN(x), x, y);
}

void ExpArray(const double* x, double shift, size_t n, double* out) {
  const DD dd;
  const VD vs = hn::Set(dd, shift);
  size_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    hn::StoreU(FixedExpD(hn::Sub(hn::LoadU(dd, x + i), vs)), dd, out + i);
  if (i < n) {
    HWY_ALIGN double buf[kLanes] = {};
    std::memcpy(buf, x + i, (n - i) * sizeof(double));
    hn::Store(FixedExpD(hn::Sub(hn::Load(dd, buf), vs)), dd, buf);
    std::memcpy(out + i, buf, (n - i) * sizeof(double));
  }
}

HWY_INLINE void ExpSpan(const double* x, VD vs, VD* acc) {
  const DD dd;
  for (size_t v = 0; v < kSpanVecs; ++v)
    acc[v] = hn::Add(acc[v], FixedExpD(hn::Sub(hn::LoadU(dd, x + v * kLanes), vs)));
}

double SumExp(const double* x, double shift, size_t n) {
  const DD dd;
  const VD vs = hn::Set(dd, shift);
  VD acc[kSpanVecs];
  for (size_t v = 0; v < kSpanVecs; ++v) acc[v] = hn::Zero(dd);
  size_t i = 0;
  for (; i + kSpan <= n; i += kSpan) ExpSpan(x + i, vs, acc);
  if (i < n) {
    // Padding of -inf: its exp is +0, which leaves every (non-negative) partial sum as it was.
    HWY_ALIGN double pad[kSpan];
    std::fill(pad, pad + kSpan, -std::numeric_limits<double>::infinity());
    std::memcpy(pad, x + i, (n - i) * sizeof(double));
    ExpSpan(pad, vs, acc);
  }
  // The fixed tree: across the span's vectors while w spans whole vectors, then inside one.
  for (size_t w = kSpanVecs / 2; w >= 1; w /= 2)
    for (size_t v = 0; v < w; ++v) acc[v] = hn::Add(acc[v], acc[v + w]);
  HWY_ALIGN double s[kLanes];
  hn::Store(acc[0], dd, s);
  for (size_t w = kLanes / 2; w >= 1; w /= 2)
    for (size_t j = 0; j < w; ++j) s[j] += s[j + w];
  return s[0];
}

}  // namespace HWY_NAMESPACE
}  // namespace stoa::kernels
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace stoa::kernels {

HWY_EXPORT(ExpArray);
HWY_EXPORT(SumExp);

namespace {

// Exact in any order; NaN is excluded by the callers' contract.
double max_of(const double* x, size_t n) {
  double m = -std::numeric_limits<double>::infinity();
  for (size_t i = 0; i < n; ++i) m = std::max(m, x[i]);
  return m;
}

}  // namespace

void fixed_exp_array(const double* x, double shift, size_t n, double* out) {
  if (n == 0) return;
  HWY_DYNAMIC_DISPATCH(ExpArray)(x, shift, n, out);
}

double fixed_sum_exp(const double* x, double shift, size_t n) {
  if (n == 0) return 0.0;
  return HWY_DYNAMIC_DISPATCH(SumExp)(x, shift, n);
}

double fixed_sum_exp_reference(const double* x, double shift, size_t n) {
  double s[32] = {};
  for (size_t i = 0; i < n; ++i) s[i % 32] += fixed_exp(x[i] - shift);
  for (size_t w = 16; w >= 1; w /= 2)
    for (size_t j = 0; j < w; ++j) s[j] += s[j + w];
  return s[0];
}

double fixed_logsumexp(const double* x, size_t n) {
  const double m = max_of(x, n);
  if (m == -std::numeric_limits<double>::infinity()) return m;
  return m + fixed_log(fixed_sum_exp(x, m, n));
}

double fixed_logsumexp_reference(const double* x, size_t n) {
  const double m = max_of(x, n);
  if (m == -std::numeric_limits<double>::infinity()) return m;
  return m + fixed_log(fixed_sum_exp_reference(x, m, n));
}

}  // namespace stoa::kernels
#endif  // HWY_ONCE
