// Engine arithmetic v2, row operations (arith_v2.h, docs/design/arithmetic.md): softmax,
// RMSNorm, W8A8 activation quantisation and the Q8_0 x Q8_0 matrix-vector product. Each is
// written as the sequence a shader reproduces: a fixed reduction order and the element-wise
// primitives of arith_v2.cpp. Compiled with -ffp-contract=off.
#include <algorithm>
#include <limits>

#include "kernels/arith_v2.h"
#include "kernels/half.h"

namespace stoa::kernels::v2 {
namespace {

constexpr uint32_t kAbs = 0x7fffffffu;
constexpr uint32_t kInfBits = 0x7f800000u;

bool is_nan(float x) {
  return (bits_of(x) & kAbs) > kInfBits;
}
bool is_finite(float x) {
  return (bits_of(x) & kAbs) < kInfBits;
}

// The fixed-order sum: value i into partial i mod 32 (each partial adds its values in index
// order, starting from +0), then the tree s[j] += s[j + w], w = 16, 8, 4, 2, 1. The same sum a
// workgroup computes with 32 invocations and a shared-memory tree, or a SIMD target with 32 / L
// vectors (kernels.md's span).
template <class Value>
float fixed_sum(size_t n, Value value) {
  float s[kSumLanes] = {};
  for (size_t i = 0; i < n; ++i) s[i % kSumLanes] = s[i % kSumLanes] + value(i);
  for (size_t w = kSumLanes / 2; w >= 1; w /= 2)
    for (size_t j = 0; j < w; ++j) s[j] = s[j] + s[j + w];
  return s[0];
}

// Round half away from zero of |t| <= 127.5 (plus a few ulp), as an int: the truncating
// conversion is exact, so is the fraction mag - floor(mag).
int32_t round_half_away(float t) {
  const float mag = float_of(bits_of(t) & kAbs);
  int32_t q = static_cast<int32_t>(mag);
  if (mag - static_cast<float>(q) >= 0.5f) q += 1;
  q = std::min(q, 127);
  return (bits_of(t) >> 31) != 0 ? -q : q;
}

}  // namespace

void softmax_row(float* x, size_t n) {
  float mx = -std::numeric_limits<float>::infinity();
  bool nan = false;
  for (size_t i = 0; i < n; ++i) {
    // Flushed first: a device that treats denormal operands as zero compares them as zero.
    x[i] = flush(x[i]);
    nan = nan || is_nan(x[i]);
    mx = x[i] > mx ? x[i] : mx;  // exact in any order (NaN handled apart)
  }
  if (nan || !is_finite(mx)) {
    // No finite maximum: a NaN, or all -inf (nothing to attend to), or a +inf logit.
    std::fill(x, x + n, float_of(kCanonicalNanBits));
    return;
  }
  for (size_t i = 0; i < n; ++i) x[i] = exp(x[i] - mx);  // -inf - mx = -inf -> +0
  // sum >= 1 (the maximum's own term), so its reciprocal is normal and finite.
  const float inv = recip(fixed_sum(n, [&](size_t i) { return x[i]; }));
  for (size_t i = 0; i < n; ++i) x[i] = flush(x[i] * inv);
}

void rmsnorm_row(const float* x, const float* weight, size_t n, float eps, float* out) {
  // Squares flushed: x^2 of |x| below 2^-63 is tiny. A sum of non-negative normal values is
  // never tiny unless zero, so the adds need no flush.
  const float ss = fixed_sum(n, [&](size_t i) {
    const float v = flush(x[i]);
    return flush(v * v);
  });
  // 1/n is a host constant in a shader (a push constant); here the same recip computes it.
  const float mean = flush(ss * recip(static_cast<float>(n)));
  const float r = rsqrt(mean + eps);
  for (size_t i = 0; i < n; ++i) {
    const float v = flush(flush(x[i]) * r);
    out[i] = weight != nullptr ? flush(v * weight[i]) : v;
  }
}

void quantize_q8(const float* x, int64_t x_stride, const Q8Activations& acts) {
  // fl(1/127): a constant, so the scale is one rounded product (v1 divides: amax / 127).
  constexpr float kInv127 = 0.00787401574803149606f;
  const int64_t groups = acts.cols / kQ8Block;
  for (int64_t b = 0; b < acts.batch; ++b) {
    for (int64_t g = 0; g < groups; ++g) {
      const float* blk = x + b * x_stride + g * kQ8Block;
      int8_t* q = acts.values + b * acts.cols + g * kQ8Block;
      const int64_t at = b * groups + g;
      // The maximum magnitude on the bits: exact, and a NaN or infinity shows as >= kInfBits.
      uint32_t amax_bits = 0;
      for (int64_t i = 0; i < kQ8Block; ++i)
        amax_bits = std::max(amax_bits, bits_of(flush(blk[i])) & kAbs);
      if (amax_bits >= kInfBits) {
        std::fill(q, q + kQ8Block, int8_t{0});
        acts.scales[at] = float_of(kCanonicalNanBits);
        if (acts.sums != nullptr) acts.sums[at] = 0;
        continue;
      }
      const float dd = flush(float_of(amax_bits) * kInv127);
      // dd is 0 or normal, so the f16 rounding's float add sees no denormal.
      acts.scales[at] = f16_bits_to_f32(f32_to_f16_bits(dd));
      const float id = dd != 0.0f ? recip(dd) : 0.0f;
      int32_t sum = 0;
      for (int64_t i = 0; i < kQ8Block; ++i) {
        // x * id may be tiny only when |x| << amax: it rounds to 0 whether or not it is flushed.
        const int32_t v = round_half_away(flush(flush(blk[i]) * id));
        q[i] = static_cast<int8_t>(v);
        sum += v;
      }
      if (acts.sums != nullptr) acts.sums[at] = sum;
    }
  }
}

void matvec_q8(const Int8Weights& w, const Q8Activations& acts, float* y, int64_t y_stride) {
  const int64_t groups = w.cols / kQ8Block;
  for (int64_t b = 0; b < acts.batch; ++b) {
    const int8_t* xq = acts.values + b * acts.cols;
    const float* xd = acts.scales + b * groups;
    for (int64_t o = 0; o < w.rows; ++o) {
      const int8_t* wq = w.values + o * w.cols;
      const uint16_t* ws = w.scales + o * groups;
      float acc = 0.0f;
      for (int64_t g = 0; g < groups; ++g) {
        int32_t isum = 0;  // exact: |isum| <= 32 * 128 * 127 < 2^24, so float(isum) is exact too
        for (int64_t i = g * kQ8Block; i < (g + 1) * kQ8Block; ++i)
          isum += int32_t{wq[i]} * int32_t{xq[i]};
        // d_w d_x is exact (two 11-bit significands), and every term and partial sum is a
        // multiple of 2^-48 (the smallest f16 step squared): nothing here is ever tiny.
        const float scale = f16_bits_to_f32(ws[g]) * xd[g];
        acc = acc + static_cast<float>(isum) * scale;
      }
      y[b * y_stride + o] = is_nan(acc) ? float_of(kCanonicalNanBits) : flush(acc);
    }
  }
}

}  // namespace stoa::kernels::v2
