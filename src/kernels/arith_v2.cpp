// Engine arithmetic v2, element-wise primitives (arith_v2.h, docs/design/arithmetic.md).
// Compiled with -ffp-contract=off (src/kernels/CMakeLists.txt): every `a * b + c` below is two
// roundings on every compiler and target, as in the shaders (`precise`).
#include "kernels/arith_v2.h"

#include "kernels/half.h"

namespace stoa::kernels::v2 {
namespace {

constexpr uint32_t kSign = 0x80000000u;
constexpr uint32_t kAbs = 0x7fffffffu;
constexpr uint32_t kInfBits = 0x7f800000u;
constexpr uint32_t kMinNormalBits = 0x00800000u;  // 2^-126

float nan_value() {
  return float_of(kCanonicalNanBits);
}
float inf_value(uint32_t sign) {
  return float_of(sign | kInfBits);
}
bool is_nan_bits(uint32_t u) {
  return (u & kAbs) > kInfBits;
}
// Tiny in the flush's sense: |x| <= 2^-126 (zeros and denormals included).
bool is_tiny_bits(uint32_t u) {
  return (u & kAbs) <= kMinNormalBits;
}
// 2^k as a float for k in [-126, 127], built from its bits (exact).
float pow2(int32_t k) {
  return float_of(static_cast<uint32_t>(k + 127) << 23);
}

// The significand of a finite non-tiny x as a float in [1, 2), and its unbiased exponent.
float significand(uint32_t abs_bits, int32_t* exponent) {
  *exponent = static_cast<int32_t>(abs_bits >> 23) - 127;
  return float_of((abs_bits & 0x007fffffu) | 0x3f800000u);
}

// Splits a float of a 24-bit significand into a high part (its top 12 bits, by clearing the low
// 12 significand bits) and the exact rest: the product of two high or low parts has at most 24
// significant bits, so it is exact. This is Dekker's two-product without fma, with the split
// done by integer masking (one AND) instead of Veltkamp's multiply by 4097.
void split(float v, float* hi, float* lo) {
  *hi = float_of(bits_of(v) & 0xfffff000u);
  *lo = v - *hi;  // exact: the dropped bits
}

// 1 / m for m in [1, 2): the minimax line 24/17 - 8/17 m (relative error <= 1/17), then three
// Newton steps y += y (1 - m y) (error 1/17 -> 3.5e-3 -> 1.2e-5 -> rounding level). The result
// is within about 1 ulp; callers that need better refine with an exact residual.
float recip_significand(float m) {
  float y = 1.41176474f - 0.470588237f * m;  // fl(24/17), fl(8/17)
  for (int step = 0; step < 3; ++step) y = y + y * (1.0f - m * y);
  return y;
}

// a - b * q exactly, when b * q is within a factor 2 of a (so the first difference is exact by
// Sterbenz's lemma) and every partial product is exact (split above). The later subtractions
// round only far below the last bit of the result's consumer.
float exact_residual(float a, float b, float q) {
  float bh, bl, qh, ql;
  split(b, &bh, &bl);
  split(q, &qh, &ql);
  return (((a - bh * qh) - bh * ql) - bl * qh) - bl * ql;
}

// q * 2^k for q in (0.5, 2) and any integer k, with overflow to +inf and the tiny flush.
float scale_by_pow2(float q, int32_t k) {
  if (k < -126) return 0.0f;  // |q 2^k| < 2^-126: tiny
  if (k > 128) return inf_value(0);
  if (k == 128) return (q * pow2(127)) * 2.0f;  // exact, or overflows to +inf when q >= 1
  return flush(q * pow2(k));                    // exact unless the result is tiny
}

}  // namespace

float divide(float a, float b) {
  const uint32_t ua = bits_of(a), ub = bits_of(b);
  if (is_nan_bits(ua) || is_nan_bits(ub)) return nan_value();
  const uint32_t sign = (ua ^ ub) & kSign;
  const uint32_t aa = ua & kAbs, ab = ub & kAbs;
  const bool a_inf = aa == kInfBits, b_inf = ab == kInfBits;
  const bool a_tiny = is_tiny_bits(aa), b_tiny = is_tiny_bits(ab);
  if ((a_inf && b_inf) || (a_tiny && b_tiny)) return nan_value();
  if (a_inf || b_tiny) return inf_value(sign);
  if (b_inf || a_tiny) return 0.0f;
  int32_t ea = 0, eb = 0;
  const float ma = significand(aa, &ea), mb = significand(ab, &eb);
  // ma / mb in (0.5, 2): q0 = ma * (1/mb), then one correction by the exact residual.
  const float y = recip_significand(mb);
  const float q0 = ma * y;
  const float q = q0 + exact_residual(ma, mb, q0) * y;
  const float r = scale_by_pow2(q, ea - eb);
  return float_of(bits_of(r) | (bits_of(r) != 0 ? sign : 0u));
}

float recip(float x) {
  return divide(1.0f, x);
}

float rsqrt(float x) {
  const uint32_t u = bits_of(x);
  if (is_nan_bits(u)) return nan_value();
  if (is_tiny_bits(u)) return inf_value(0);
  if (u & kSign) return nan_value();
  if (u == kInfBits) return 0.0f;
  int32_t e = 0;
  float m = significand(u, &e);
  if (e & 1) {  // make the exponent even: m in [1, 4), e in [-126, 126]
    m = m * 2.0f;
    e -= 1;
  }
  // The classic bit-trick seed on m's bits (relative error <= 3.5e-3), three Newton steps
  // y = y (1.5 - (m/2) y^2) (-> 1.8e-5 -> 5e-10 -> rounding level), then one step y += y/2 *
  // 1 - m y^2 from exact pieces (Dekker split): m y = th + tl exactly, 1 - th y exactly, so
  // only tl y (about 2^-24 of the residual's scale) rounds.
  float y = float_of(0x5f3759dfu - (bits_of(m) >> 1));
  const float h = m * 0.5f;  // exact
  for (int step = 0; step < 3; ++step) y = y * (1.5f - (h * y) * y);
  const float th = m * y;
  const float tl = -exact_residual(th, m, y);  // m y - th, exact
  const float res = exact_residual(1.0f, th, y) - tl * y;
  y = y + (y * 0.5f) * res;
  return flush(y * pow2(-e / 2));
}

float exp(float x) {
  const uint32_t u = bits_of(x);
  if (is_nan_bits(u)) return nan_value();
  // Inputs at or below 2^-25 in magnitude round to 1 (e^x = 1 + x + ...); a tiny input is one.
  if ((u & kAbs) <= 0x33000000u) return 1.0f;
  if (x > 88.72f) return inf_value(0);
  if (x < -87.5f) return 0.0f;  // e^-87.5 < 2^-126: tiny (and -inf)
  // n = round(x / ln 2), ties to even, by the 1.5 * 2^23 shifter: no rounding-mode instruction.
  const float shifter = 12582912.0f;
  const float n = (x * 1.44269504088896341f + shifter) - shifter;
  // r = x - n ln 2 with ln 2 in two parts (n * 0.693359375 is exact): |r| <= 0.35.
  const float r = (x - n * 0.693359375f) - n * -2.12194440e-4f;
  // Cephes expf: e^r = 1 + r + r^2 P(r). Where r^2 P(r) underflows (|r| < 2^-63) it is absorbed
  // by + r, whose last bit is far above it, so a flushing device gives the same sum.
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = ((p * r) * r + r) + 1.0f;
  // p * 2^n as two exact power-of-two factors (n reaches 128, one factor's range is 127).
  const int32_t ni = static_cast<int32_t>(n);
  const int32_t half = ni / 2;  // truncation: both parts in [-63, 64]
  return flush((p * pow2(half)) * pow2(ni - half));
}

float sigmoid(float x) {
  return recip(1.0f + exp(-flush(x)));
}

float silu(float x) {
  const float g = flush(x);
  return divide(g, 1.0f + exp(-g));
}

}  // namespace stoa::kernels::v2
