// Engine arithmetic v2 on SIMD vectors (docs/design/arithmetic.md): the element-wise primitives of
// kernels/arith_v2.cpp, lane by lane, the same bits as the scalar reference on every target.
// Only Add/Sub/Mul (never fused: the including files compile with -ffp-contract=off), integer
// operations on the bits, and comparisons whose lanes are then overridden where an operand is
// special. Included inside each Highway target of vec_ops.cpp (the -inl.h convention: the guard
// toggles per target).
#if defined(STOA_KERNELS_ARITH_V2_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef STOA_KERNELS_ARITH_V2_INL_H_
#undef STOA_KERNELS_ARITH_V2_INL_H_
#else
#define STOA_KERNELS_ARITH_V2_INL_H_
#endif

#include <hwy/highway.h>

HWY_BEFORE_NAMESPACE();
namespace stoa::kernels {
namespace HWY_NAMESPACE {
namespace v2v {
namespace hn = hwy::HWY_NAMESPACE;

template <class D>
using IntOf = hn::RebindToSigned<D>;

// |x| as bits: every comparison below is on these, in int32 (all of them are non-negative;
// Highway has no integer <=, so x <= c is written x < c + 1).
template <class D>
HWY_INLINE hn::Vec<IntOf<D>> AbsBits(D d, hn::Vec<D> x) {
  const IntOf<D> di;
  (void)d;
  return hn::And(hn::BitCast(di, x), hn::Set(di, 0x7fffffff));
}

template <class D>
HWY_INLINE hn::Mask<D> IsNan(D d, hn::Vec<D> x) {
  const IntOf<D> di;
  return hn::RebindMask(d, hn::Gt(AbsBits(d, x), hn::Set(di, 0x7f800000)));
}

template <class D>
HWY_INLINE hn::Mask<D> IsTiny(D d, hn::Vec<D> x) {  // |x| <= 2^-126, zeros included
  const IntOf<D> di;
  return hn::RebindMask(d, hn::Lt(AbsBits(d, x), hn::Set(di, 0x00800001)));
}

template <class D>
HWY_INLINE hn::Vec<D> CanonicalNan(D d) {
  const IntOf<D> di;
  return hn::BitCast(d, hn::Set(di, 0x7fc00000));
}

// v2::flush: tiny -> +0, any NaN -> the canonical NaN.
template <class D>
HWY_INLINE hn::Vec<D> Flush(D d, hn::Vec<D> x) {
  return hn::IfThenElse(IsNan(d, x), CanonicalNan(d), hn::IfThenZeroElse(IsTiny(d, x), x));
}

// The tiny half of v2::flush alone: |x| <= 2^-126 -> +0, a NaN kept as it is. Enough for an
// input whose NaN can only reach a result that is then flushed (a NaN stays a NaN through
// products and sums, and the final Flush makes it the canonical one).
template <class D>
HWY_INLINE hn::Vec<D> FlushTiny(D d, hn::Vec<D> x) {
  return hn::IfThenZeroElse(IsTiny(d, x), x);
}

// v2::flush_summand: |t| < 2^-100 -> +0.
template <class D>
HWY_INLINE hn::Vec<D> FlushSummand(D d, hn::Vec<D> t) {
  const IntOf<D> di;
  return hn::IfThenZeroElse(hn::RebindMask(d, hn::Lt(AbsBits(d, t), hn::Set(di, 0x0d800000))), t);
}

// 2^k from its bits, k in [-126, 127] (lanes outside give garbage that callers override).
template <class D>
HWY_INLINE hn::Vec<D> Pow2(D d, hn::Vec<IntOf<D>> k) {
  const IntOf<D> di;
  return hn::BitCast(d, hn::ShiftLeft<23>(hn::Add(k, hn::Set(di, 127))));
}

// The exact a - b * q of v2's exact_residual: b and q split at their top 12 significand bits.
template <class D>
HWY_INLINE hn::Vec<D> ExactResidual(D d, hn::Vec<D> a, hn::Vec<D> b, hn::Vec<D> q) {
  const IntOf<D> di;
  const auto high = hn::Set(di, static_cast<int32_t>(0xfffff000u));
  const auto bh = hn::BitCast(d, hn::And(hn::BitCast(di, b), high));
  const auto qh = hn::BitCast(d, hn::And(hn::BitCast(di, q), high));
  const auto bl = hn::Sub(b, bh), ql = hn::Sub(q, qh);
  return hn::Sub(hn::Sub(hn::Sub(hn::Sub(a, hn::Mul(bh, qh)), hn::Mul(bh, ql)), hn::Mul(bl, qh)),
                 hn::Mul(bl, ql));
}

// v2::divide's arithmetic without its sign and special cases: |a / b| as q * 2^k (q from the
// significands, k = e_a - e_b clamped to [-126, 127]). For a and b finite, nonzero and not tiny
// with k in [-126, 127] this is the quotient's magnitude exactly as v2::divide forms it (normal,
// so its flush is a no-op); Divide overrides the other lanes. Sets *k_out to the unclamped k.
template <class D>
HWY_INLINE hn::Vec<D> DivideMagnitude(D d, hn::Vec<D> a, hn::Vec<D> b, hn::Vec<IntOf<D>>* k_out) {
  const IntOf<D> di;
  const auto aa = AbsBits(d, a), ab = AbsBits(d, b);
  // Significands in [1, 2) and exponents from the bits.
  const auto mant = hn::Set(di, 0x007fffff), one_bits = hn::Set(di, 0x3f800000);
  const auto ma = hn::BitCast(d, hn::Or(hn::And(aa, mant), one_bits));
  const auto mb = hn::BitCast(d, hn::Or(hn::And(ab, mant), one_bits));
  const auto k = hn::Sub(hn::ShiftRight<23>(aa), hn::ShiftRight<23>(ab));
  // 1 / mb: the line 24/17 - 8/17 mb, three Newton steps.
  const auto one = hn::Set(d, 1.0f);
  auto y = hn::Sub(hn::Set(d, 1.41176474f), hn::Mul(hn::Set(d, 0.470588237f), mb));
  for (int step = 0; step < 3; ++step) y = hn::Add(y, hn::Mul(y, hn::Sub(one, hn::Mul(mb, y))));
  const auto q0 = hn::Mul(ma, y);
  const auto q = hn::Add(q0, hn::Mul(ExactResidual(d, ma, mb, q0), y));
  *k_out = k;
  return hn::Mul(q, Pow2(d, hn::Max(hn::Min(k, hn::Set(di, 127)), hn::Set(di, -126))));
}

// The sign bit of a / b.
template <class D>
HWY_INLINE hn::Vec<IntOf<D>> QuotientSign(D d, hn::Vec<D> a, hn::Vec<D> b) {
  const IntOf<D> di;
  return hn::And(hn::Xor(hn::BitCast(di, a), hn::BitCast(di, b)), hn::Set(di, INT32_MIN));
}

// v2::divide, every special case of the scalar reference as a lane mask.
template <class D>
HWY_INLINE hn::Vec<D> Divide(D d, hn::Vec<D> a, hn::Vec<D> b) {
  const IntOf<D> di;
  const auto inf_bits = hn::Set(di, 0x7f800000);
  const auto aa = AbsBits(d, a), ab = AbsBits(d, b);
  const auto sign = QuotientSign(d, a, b);
  const auto nan = hn::Or(IsNan(d, a), IsNan(d, b));
  const auto a_inf = hn::RebindMask(d, hn::Eq(aa, inf_bits));
  const auto b_inf = hn::RebindMask(d, hn::Eq(ab, inf_bits));
  const auto a_tiny = IsTiny(d, a), b_tiny = IsTiny(d, b);
  // q * 2^k: k = 128 in two exact steps, k < -126 tiny (+0), k > 128 overflow (+inf).
  hn::Vec<IntOf<D>> k;
  auto r = DivideMagnitude(d, a, b, &k);
  r = hn::IfThenElse(hn::RebindMask(d, hn::Eq(k, hn::Set(di, 128))), hn::Add(r, r), r);
  r = Flush(d, r);
  r = hn::IfThenZeroElse(hn::RebindMask(d, hn::Lt(k, hn::Set(di, -126))), r);
  const auto inf = hn::BitCast(d, inf_bits);
  r = hn::IfThenElse(hn::RebindMask(d, hn::Gt(k, hn::Set(di, 128))), inf, r);
  // The quotient's sign on a nonzero result (+0 stays +0).
  const auto r_bits = hn::BitCast(di, r);
  r = hn::BitCast(d, hn::Or(r_bits, hn::IfThenZeroElse(hn::Eq(r_bits, hn::Zero(di)), sign)));
  r = hn::IfThenZeroElse(hn::Or(b_inf, a_tiny), r);
  r = hn::IfThenElse(hn::Or(a_inf, b_tiny), hn::BitCast(d, hn::Or(inf_bits, sign)), r);
  const auto undefined = hn::Or(hn::And(a_inf, b_inf), hn::And(a_tiny, b_tiny));
  return hn::IfThenElse(hn::Or(nan, undefined), CanonicalNan(d), r);
}

// v2::exp's arithmetic on x already clamped to [-87.5, 88.72] and not NaN: the 1.5 * 2^23
// shifter, the polynomial in Horner form, two exact power-of-two factors (the exponent's half
// truncated toward zero). For x in [-87.3, 88.7] with |x| > 2^-25 this is v2::exp itself (a
// normal result, so neither the flush nor an override changes it).
template <class D>
HWY_INLINE hn::Vec<D> ExpCore(D d, hn::Vec<D> xc) {
  const IntOf<D> di;
  const auto shifter = hn::Set(d, 12582912.0f);
  const auto n = hn::Sub(hn::Add(hn::Mul(xc, hn::Set(d, 1.44269504088896341f)), shifter), shifter);
  const auto r = hn::Sub(hn::Sub(xc, hn::Mul(n, hn::Set(d, 0.693359375f))),
                         hn::Mul(n, hn::Set(d, -2.12194440e-4f)));
  auto p = hn::Set(d, 1.9875691500e-4f);
  p = hn::Add(hn::Mul(p, r), hn::Set(d, 1.3981999507e-3f));
  p = hn::Add(hn::Mul(p, r), hn::Set(d, 8.3334519073e-3f));
  p = hn::Add(hn::Mul(p, r), hn::Set(d, 4.1665795894e-2f));
  p = hn::Add(hn::Mul(p, r), hn::Set(d, 1.6666665459e-1f));
  p = hn::Add(hn::Mul(p, r), hn::Set(d, 5.0000001201e-1f));
  p = hn::Add(hn::Add(hn::Mul(hn::Mul(p, r), r), r), hn::Set(d, 1.0f));
  const auto ni = hn::ConvertTo(di, n);
  // ni / 2 truncated toward zero, as the scalar reference's integer division.
  const auto half = hn::ShiftRight<1>(
      hn::Add(ni, hn::BitCast(di, hn::ShiftRight<31>(hn::BitCast(hn::RebindToUnsigned<D>(), ni)))));
  return hn::Mul(hn::Mul(p, Pow2(d, half)), Pow2(d, hn::Sub(ni, half)));
}

// v2::exp: ExpCore on a clamped, NaN-free copy of x, then the flush and the special lanes.
template <class D>
HWY_INLINE hn::Vec<D> Exp(D d, hn::Vec<D> x) {
  const IntOf<D> di;
  const auto nan = IsNan(d, x);
  const auto lo = hn::Set(d, -87.5f), hi = hn::Set(d, 88.72f);
  const auto xc = hn::Min(hn::Max(hn::IfThenZeroElse(nan, x), lo), hi);
  auto y = Flush(d, ExpCore(d, xc));
  y = hn::IfThenZeroElse(hn::Lt(x, lo), y);
  y = hn::IfThenElse(hn::Gt(x, hi), hn::BitCast(d, hn::Set(di, 0x7f800000)), y);
  y = hn::IfThenElse(hn::RebindMask(d, hn::Lt(AbsBits(d, x), hn::Set(di, 0x33000001))),
                     hn::Set(d, 1.0f), y);
  return hn::IfThenElse(nan, CanonicalNan(d), y);
}

// v2::silu: g = flush(x), g / (1 + e^-g). Where every lane has 2^-25 < |x| <= 80 (nearly every
// SwiGLU gate) no special case can arise: e^-g is ExpCore's normal value, 1 + e^-g is finite and
// at least 1, and the quotient's exponent difference lies in [-110, 6], so the cores alone give
// v2's bits (about 40 % fewer operations); other vectors take the whole sequence.
template <class D>
HWY_INLINE hn::Vec<D> Silu(D d, hn::Vec<D> x) {
  const IntOf<D> di;
  const auto mag = AbsBits(d, x);
  const auto ordinary = hn::And(hn::Gt(mag, hn::Set(di, 0x33000000)),   // |x| > 2^-25
                                hn::Lt(mag, hn::Set(di, 0x42a00001)));  // |x| <= 80
  if (hn::AllTrue(di, ordinary)) {
    const auto b = hn::Add(hn::Set(d, 1.0f), ExpCore(d, hn::Neg(x)));
    hn::Vec<IntOf<D>> k;
    const auto r = DivideMagnitude(d, x, b, &k);
    return hn::BitCast(d, hn::Or(hn::BitCast(di, r), QuotientSign(d, x, b)));
  }
  const auto g = FlushTiny(d, x);  // a NaN: Exp and Divide make it the canonical one
  return Divide(d, g, hn::Add(hn::Set(d, 1.0f), Exp(d, hn::Neg(g))));
}

}  // namespace v2v
}  // namespace HWY_NAMESPACE
}  // namespace stoa::kernels
HWY_AFTER_NAMESPACE();

#endif  // STOA_KERNELS_ARITH_V2_INL_H_
