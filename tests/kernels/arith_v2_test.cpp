// Engine arithmetic v2's scalar reference (kernels/arith_v2.h) against the correctly rounded
// (or double) result over wide sweeps, with the measured worst case printed and a bound asserted
// (the bounds are the ones docs/design/arithmetic.md states), and its special values.
#include "kernels/arith_v2.h"

#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <random>
#include <vector>

#include "kernels/arith_v2_test_util.h"
#include "kernels/half.h"

namespace stoa::kernels {
namespace {

constexpr int kSweep = 2000000;
constexpr float kInf = std::numeric_limits<float>::infinity();

// A random finite float whose exponent is uniform in [lo, hi] (so every binade is swept, not
// just the large ones a uniform real draw favours), random significand and sign.
float wide_float(std::mt19937_64& rng, int lo, int hi, bool negative_too = true) {
  std::uniform_int_distribution<int> e(lo, hi);
  const uint32_t mant = static_cast<uint32_t>(rng()) & 0x7fffffu;
  const uint32_t sign = negative_too && (rng() & 1) ? 0x80000000u : 0u;
  return float_of(sign | (static_cast<uint32_t>(e(rng) + 127) << 23) | mant);
}

TEST(ArithV2, DivideAndRecipAgainstCorrectRounding) {
  std::mt19937_64 rng(54);
  int64_t worst_div = 0, worst_recip = 0;
  for (int i = 0; i < kSweep; ++i) {
    const float a = wide_float(rng, -126, 127), b = wide_float(rng, -126, 127);
    // Hardware f32 division is correctly rounded; the spec's tiny flush applies to both.
    worst_div = std::max(worst_div, ulp_distance(v2::divide(a, b), v2::flush(a / b)));
    worst_recip = std::max(worst_recip, ulp_distance(v2::recip(b), v2::flush(1.0f / b)));
  }
  // Quotients of the same binade (the residual's hardest case) and exact ones.
  for (int i = 0; i < kSweep; ++i) {
    const float a = wide_float(rng, 0, 0), b = wide_float(rng, 0, 0);
    worst_div = std::max(worst_div, ulp_distance(v2::divide(a, b), a / b));
  }
  std::printf("divide: max %lld ulp over %d pairs, recip: max %lld ulp over %d values\n",
              static_cast<long long>(worst_div), 2 * kSweep, static_cast<long long>(worst_recip),
              kSweep);
  EXPECT_LE(worst_div, 1);
  EXPECT_LE(worst_recip, 1);
  for (int k = -125; k <= 125; ++k) {  // powers of two are exact
    const float p = std::ldexp(1.0f, k);
    EXPECT_EQ(v2::recip(p), std::ldexp(1.0f, -k)) << k;
    EXPECT_EQ(v2::divide(3.0f * p, p), 3.0f) << k;
  }
}

TEST(ArithV2, RsqrtAgainstDouble) {
  std::mt19937_64 rng(55);
  int64_t worst = 0;
  for (int i = 0; i < kSweep; ++i) {
    const float x = wide_float(rng, -125, 127, false);
    const float want = static_cast<float>(1.0 / std::sqrt(static_cast<double>(x)));
    worst = std::max(worst, ulp_distance(v2::rsqrt(x), want));
  }
  std::printf("rsqrt: max %lld ulp over %d draws\n", static_cast<long long>(worst), kSweep);
  EXPECT_LE(worst, 1);
  for (int k = -62; k <= 62; ++k)
    EXPECT_EQ(v2::rsqrt(std::ldexp(1.0f, 2 * k)), std::ldexp(1.0f, -k)) << k;
}

// e^x against exp in double rounded once: every binade of |x| up to the overflow, and a uniform
// sweep of the whole finite range.
TEST(ArithV2, ExpSigmoidSiluAgainstDouble) {
  std::mt19937_64 rng(56);
  std::uniform_real_distribution<float> wide(-87.3f, 88.7f);
  int64_t worst_exp = 0, worst_sigmoid = 0, worst_silu = 0;
  for (int i = 0; i < kSweep; ++i) {
    const float x = (i & 1) ? wide(rng) : wide_float(rng, -40, 6);
    if (!(x > -87.3f && x < 88.7f)) continue;
    const double xd = x;
    worst_exp = std::max(worst_exp, ulp_distance(v2::exp(x), static_cast<float>(std::exp(xd))));
    const float sig = static_cast<float>(1.0 / (1.0 + std::exp(-xd)));
    worst_sigmoid = std::max(worst_sigmoid, ulp_distance(v2::sigmoid(x), v2::flush(sig)));
    const float silu = static_cast<float>(xd / (1.0 + std::exp(-xd)));
    worst_silu = std::max(worst_silu, ulp_distance(v2::silu(x), v2::flush(silu)));
  }
  std::printf("exp: max %lld ulp, sigmoid: max %lld ulp, silu: max %lld ulp\n",
              static_cast<long long>(worst_exp), static_cast<long long>(worst_sigmoid),
              static_cast<long long>(worst_silu));
  EXPECT_LE(worst_exp, 2);
  EXPECT_LE(worst_sigmoid, 3);
  EXPECT_LE(worst_silu, 3);
}

TEST(ArithV2, SpecialValues) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float denormal = float_of(0x00000005u);
  const auto is_canonical_nan = [](float v) { return bits_of(v) == v2::kCanonicalNanBits; };
  const auto is_plus_zero = [](float v) { return bits_of(v) == 0u; };
  // flush: <= 2^-126 in magnitude (FLT_MIN itself included) becomes +0.
  EXPECT_TRUE(is_plus_zero(v2::flush(-0.0f)));
  EXPECT_TRUE(is_plus_zero(v2::flush(-denormal)));
  EXPECT_TRUE(is_plus_zero(v2::flush(FLT_MIN)));
  EXPECT_EQ(v2::flush(std::nextafter(FLT_MIN, 1.0f)), std::nextafter(FLT_MIN, 1.0f));
  // Any NaN leaves a primitive as the canonical one, whatever payload and sign came in.
  const float payload_nan = float_of(0xffc01234u);
  EXPECT_TRUE(is_canonical_nan(v2::flush(payload_nan)));
  EXPECT_TRUE(is_canonical_nan(v2::add(payload_nan, 1.0f)));
  EXPECT_TRUE(is_canonical_nan(v2::add(1.0f, payload_nan)));
  float normed[2];
  const float row[2] = {1.0f, payload_nan};
  v2::rmsnorm_row(row, nullptr, 2, 1e-6f, normed);
  EXPECT_TRUE(is_canonical_nan(normed[0]));
  EXPECT_TRUE(is_canonical_nan(normed[1]));
  // divide / recip
  EXPECT_EQ(v2::divide(1.0f, 0.0f), kInf);
  EXPECT_EQ(v2::divide(-1.0f, 0.0f), -kInf);
  EXPECT_EQ(v2::divide(1.0f, -denormal), -kInf);
  EXPECT_TRUE(is_canonical_nan(v2::divide(0.0f, 0.0f)));
  EXPECT_TRUE(is_canonical_nan(v2::divide(kInf, -kInf)));
  EXPECT_TRUE(is_canonical_nan(v2::divide(nan, 1.0f)));
  EXPECT_TRUE(is_canonical_nan(v2::divide(1.0f, -nan)));
  EXPECT_TRUE(is_plus_zero(v2::divide(-0.0f, 5.0f)));
  EXPECT_TRUE(is_plus_zero(v2::divide(-2.0f, kInf)));
  EXPECT_EQ(v2::divide(-kInf, 2.0f), -kInf);
  EXPECT_EQ(v2::divide(FLT_MAX, 0.5f), kInf);  // overflow
  EXPECT_EQ(v2::divide(FLT_MAX, 2.0f), FLT_MAX / 2.0f);
  EXPECT_EQ(v2::divide(std::ldexp(1.5f, 127), 0.75f), kInf);  // exactly 2^128
  EXPECT_EQ(v2::divide(std::ldexp(1.0f, 127), 0.75f), std::ldexp(1.0f, 127) / 0.75f);  // k = 128
  EXPECT_TRUE(is_plus_zero(v2::divide(FLT_MIN * 4.0f, 8.0f)));  // FLT_MIN / 2: tiny
  EXPECT_EQ(v2::divide(FLT_MIN * 4.0f, 2.0f), FLT_MIN * 2.0f);
  EXPECT_EQ(v2::divide(6.0f, -3.0f), -2.0f);
  EXPECT_EQ(v2::divide(1.0f, 3.0f), 1.0f / 3.0f);
  EXPECT_EQ(v2::recip(-4.0f), -0.25f);
  EXPECT_TRUE(is_plus_zero(v2::recip(FLT_MAX)));
  EXPECT_TRUE(is_plus_zero(v2::recip(std::ldexp(1.0f, 126))));  // 2^-126: flushed
  EXPECT_EQ(v2::recip(std::ldexp(1.0f, 125)), std::ldexp(1.0f, -125));
  EXPECT_EQ(v2::recip(std::ldexp(1.0f, -126) * 1.5f), 1.0f / (std::ldexp(1.0f, -126) * 1.5f));
  // rsqrt
  EXPECT_EQ(v2::rsqrt(4.0f), 0.5f);
  EXPECT_EQ(v2::rsqrt(0.0f), kInf);
  EXPECT_EQ(v2::rsqrt(-0.0f), kInf);
  EXPECT_EQ(v2::rsqrt(denormal), kInf);
  EXPECT_TRUE(is_canonical_nan(v2::rsqrt(-1.0f)));
  EXPECT_TRUE(is_canonical_nan(v2::rsqrt(nan)));
  EXPECT_TRUE(is_plus_zero(v2::rsqrt(kInf)));
  EXPECT_EQ(v2::rsqrt(FLT_MAX), static_cast<float>(1.0 / std::sqrt(double{FLT_MAX})));
  // exp
  EXPECT_EQ(v2::exp(0.0f), 1.0f);
  EXPECT_EQ(v2::exp(-denormal), 1.0f);
  EXPECT_EQ(v2::exp(std::ldexp(1.0f, -25)), 1.0f);
  EXPECT_EQ(v2::exp(-std::ldexp(1.0f, -25)), 1.0f);
  EXPECT_EQ(v2::exp(1.0f), static_cast<float>(std::exp(1.0)));
  EXPECT_TRUE(is_plus_zero(v2::exp(-kInf)));
  EXPECT_TRUE(is_plus_zero(v2::exp(-87.4f)));  // e^-87.4 < 2^-126
  EXPECT_TRUE(is_plus_zero(v2::exp(-1000.0f)));
  EXPECT_EQ(v2::exp(kInf), kInf);
  EXPECT_EQ(v2::exp(88.73f), kInf);
  EXPECT_TRUE(std::isfinite(v2::exp(88.72f)));
  EXPECT_TRUE(is_canonical_nan(v2::exp(-nan)));
  // sigmoid / silu
  EXPECT_EQ(v2::sigmoid(0.0f), 0.5f);
  EXPECT_EQ(v2::sigmoid(kInf), 1.0f);
  EXPECT_EQ(v2::sigmoid(100.0f), 1.0f);
  EXPECT_TRUE(is_plus_zero(v2::sigmoid(-kInf)));
  EXPECT_TRUE(is_plus_zero(v2::sigmoid(-100.0f)));
  EXPECT_TRUE(is_canonical_nan(v2::sigmoid(nan)));
  EXPECT_TRUE(is_plus_zero(v2::silu(-0.0f)));
  EXPECT_TRUE(is_plus_zero(v2::silu(-100.0f)));
  EXPECT_EQ(v2::silu(100.0f), 100.0f);
  EXPECT_EQ(v2::silu(kInf), kInf);
  EXPECT_TRUE(is_canonical_nan(v2::silu(-kInf)));  // -inf / inf, as in IEEE
  EXPECT_TRUE(is_canonical_nan(v2::silu(nan)));
}

TEST(ArithV2, SoftmaxRowAgainstDouble) {
  std::mt19937_64 rng(57);
  std::uniform_real_distribution<float> logit(-30.0f, 30.0f);
  double worst = 0;
  for (size_t n : {1, 2, 7, 31, 32, 33, 64, 100, 1000, 4096}) {
    for (int rep = 0; rep < 20; ++rep) {
      std::vector<float> x(n);
      for (float& v : x) v = logit(rng);
      if (n > 3) x[n / 2] = -kInf;  // a masked position
      double mx = -HUGE_VAL, sum = 0;
      for (float v : x) mx = std::max(mx, double{v});
      for (float v : x) sum += std::exp(double{v} - mx);
      std::vector<float> y = x;
      v2::softmax_row(y.data(), n);
      for (size_t i = 0; i < n; ++i) {
        const double want = std::exp(double{x[i]} - mx) / sum;
        if (want < 1e-30) {
          EXPECT_LE(y[i], 1e-30);
          continue;
        }
        worst = std::max(worst, std::fabs(y[i] - want) / want);
      }
    }
  }
  std::printf("softmax_row: max relative error %.3g (%.2f x 2^-24)\n", worst,
              worst / std::ldexp(1.0, -24));
  EXPECT_LT(worst, 64 * std::ldexp(1.0, -24));
  std::vector<float> row = {0.0f, -kInf};
  v2::softmax_row(row.data(), 2);
  EXPECT_EQ(row[0], 1.0f);
  EXPECT_EQ(bits_of(row[1]), 0u);
  row = {-kInf, -kInf};
  v2::softmax_row(row.data(), 2);
  EXPECT_EQ(bits_of(row[0]), v2::kCanonicalNanBits);
  row = {1.0f, std::numeric_limits<float>::quiet_NaN(), 2.0f};
  v2::softmax_row(row.data(), 3);
  for (float v : row) EXPECT_EQ(bits_of(v), v2::kCanonicalNanBits);
}

TEST(ArithV2, RmsnormRowAgainstDouble) {
  std::mt19937_64 rng(58);
  std::normal_distribution<float> value(0.0f, 1.0f);
  double worst = 0;
  for (size_t n : {1, 5, 32, 64, 100, 1024, 2048, 4096}) {
    for (int rep = 0; rep < 20; ++rep) {
      const float scale = std::ldexp(1.0f, static_cast<int>(rng() % 40) - 20);
      std::vector<float> x(n), w(n), y(n);
      for (size_t i = 0; i < n; ++i) {
        x[i] = value(rng) * scale;
        w[i] = 1.0f + 0.1f * value(rng);
      }
      const float eps = 1e-6f;
      double ss = 0;
      for (float v : x) ss += double{v} * v;
      const double inv = 1.0 / std::sqrt(ss / static_cast<double>(n) + double{eps});
      v2::rmsnorm_row(x.data(), w.data(), n, eps, y.data());
      for (size_t i = 0; i < n; ++i) {
        const double want = double{x[i]} * inv * w[i];
        if (std::fabs(want) < 1e-30) continue;
        worst = std::max(worst, std::fabs(y[i] - want) / std::fabs(want));
      }
    }
  }
  std::printf("rmsnorm_row: max relative error %.3g (%.2f x 2^-24)\n", worst,
              worst / std::ldexp(1.0, -24));
  EXPECT_LT(worst, 64 * std::ldexp(1.0, -24));
  std::vector<float> zeros(40, 0.0f), out(40, 1.0f);
  v2::rmsnorm_row(zeros.data(), nullptr, zeros.size(), 1e-6f, out.data());
  for (float v : out) EXPECT_EQ(bits_of(v), 0u);
}

// Attention for one query against double: scores, probabilities and the weighted values, for
// key counts under and over the 32 lanes and head sizes of the models (64, 128).
TEST(ArithV2, AttentionHeadAgainstDouble) {
  std::mt19937_64 rng(60);
  std::normal_distribution<float> value(0.0f, 1.0f);
  double worst_scores = 0, worst_out = 0;
  for (size_t head_dim : {64, 128}) {
    for (size_t n_keys : {1, 7, 33, 300}) {
      std::vector<float> q(head_dim), k(n_keys * head_dim), v(n_keys * head_dim);
      for (float& x : q) x = value(rng);
      for (float& x : k) x = value(rng);
      for (float& x : v) x = value(rng);
      const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
      std::vector<float> scores(n_keys), out(head_dim);
      v2::attention_head(q.data(), k.data(), head_dim, v.data(), head_dim, n_keys, head_dim, scale,
                         scores.data(), out.data());
      std::vector<double> s(n_keys);
      double mx = -HUGE_VAL, sum = 0;
      for (size_t t = 0; t < n_keys; ++t) {
        double d = 0;
        for (size_t i = 0; i < head_dim; ++i) d += double{q[i]} * k[t * head_dim + i];
        s[t] = d * scale;
        mx = std::max(mx, s[t]);
      }
      for (double& x : s) sum += (x = std::exp(x - mx));
      for (size_t t = 0; t < n_keys; ++t) {
        const double p = s[t] / sum;
        if (p > 1e-30) worst_scores = std::max(worst_scores, std::fabs(scores[t] - p) / p);
      }
      for (size_t d = 0; d < head_dim; ++d) {
        double o = 0, mag = 0;
        for (size_t t = 0; t < n_keys; ++t) {
          o += s[t] / sum * v[t * head_dim + d];
          mag += std::fabs(s[t] / sum * v[t * head_dim + d]);
        }
        worst_out = std::max(worst_out, std::fabs(out[d] - o) / mag);
      }
    }
  }
  // The probabilities inherit the scores' absolute error times the logit (|score| up to ~4 here).
  std::printf(
      "attention_head: probabilities max relative error %.3g, outputs max |error| / "
      "sum|term| %.3g\n",
      worst_scores, worst_out);
  EXPECT_LT(worst_scores, 1e-5);
  EXPECT_LT(worst_out, 1e-5);
}

TEST(ArithV2, QuantizeAndMatvecAgainstExactSums) {
  std::mt19937_64 rng(59);
  for (const auto& [rows, cols] : {std::pair{7, 32}, {64, 256}, {33, 1024}, {5, 4096}}) {
    const RandomQ8 m = random_q8(rng, rows, cols, 3);
    // Quantisation: every value within half a step of x / d (d before its f16 rounding).
    for (int64_t b = 0; b < m.batch; ++b)
      for (int64_t i = 0; i < cols; ++i) {
        const float x = v2::flush(m.x[b * cols + i]);  // the spec flushes tiny inputs
        const int q = m.xq[b * cols + i];
        ASSERT_LE(std::abs(q), 127);
        const float amax = m.block_amax[(b * cols + i) / 32];
        if (v2::flush(amax * 0.00787401574803149606f) == 0.0f) {  // a tiny scale: all zeros
          EXPECT_EQ(q, 0);
          continue;
        }
        EXPECT_LE(std::fabs(double{x} / (double{amax} / 127.0) - q), 0.5 + 1e-4);
      }
    // The product: against the exact (double) sum of the same terms, relative to sum |term|.
    std::vector<float> y(m.batch * rows);
    v2::matvec_q8(m.weights(), m.acts(), y.data(), rows);
    double worst = 0;
    for (int64_t b = 0; b < m.batch; ++b)
      for (int64_t o = 0; o < rows; ++o) {
        double sum = 0, mag = 0;
        for (int64_t g = 0; g < cols / 32; ++g) {
          int64_t isum = 0;
          for (int64_t i = g * 32; i < (g + 1) * 32; ++i)
            isum += int64_t{m.wq[o * cols + i]} * m.xq[b * cols + i];
          const double term = static_cast<double>(isum) * f16_bits_to_f32(m.ws[o * cols / 32 + g]) *
                              m.xd[b * cols / 32 + g];
          sum += term;
          mag += std::fabs(term);
        }
        if (mag > 0) worst = std::max(worst, std::fabs(y[b * rows + o] - sum) / mag);
      }
    const double bound = static_cast<double>(cols / 32 + 1) * std::ldexp(1.0, -24);
    std::printf("matvec_q8 %lldx%lld: max |error| / sum|term| = %.3g (bound %.3g)\n",
                static_cast<long long>(rows), static_cast<long long>(cols), worst, bound);
    EXPECT_LE(worst, bound);
  }
}

}  // namespace
}  // namespace stoa::kernels
