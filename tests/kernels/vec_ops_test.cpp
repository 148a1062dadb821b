// f32 forward-pass helpers against their scalar references on every SIMD target, over lengths
// that exercise the vector body and every tail size.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "kernels/reference.h"
#include "kernels/target_loop.h"
#include "kernels/vec_ops.h"

namespace stoa::kernels {
namespace {

std::vector<float> random_vec(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = normal(rng);
  return v;
}

std::vector<size_t> lengths() {
  std::vector<size_t> out;
  for (size_t n = 1; n <= 70; ++n) out.push_back(n);
  for (size_t n : {127, 128, 129, 1000, 4096}) out.push_back(n);
  return out;
}

TEST(VecOps, DotAndAxpy) {
  test::for_each_target([] {
    for (size_t n : lengths()) {
      auto a = random_vec(n, 1 + n), b = random_vec(n, 1000 + n);
      double abs_sum = 0;
      for (size_t i = 0; i < n; ++i) abs_sum += std::fabs(double{a[i]} * b[i]);
      EXPECT_NEAR(dot(a.data(), b.data(), n), ref::dot(a.data(), b.data(), n), 1e-6 * abs_sum) << n;
      auto y = random_vec(n, 7 + n), want = y;
      axpy(0.37f, a.data(), y.data(), n);
      ref::axpy(0.37f, a.data(), want.data(), n);
      for (size_t i = 0; i < n; ++i)
        ASSERT_NEAR(y[i], want[i], 1e-6f * (std::fabs(want[i]) + 1)) << n << " " << i;
    }
  });
}

TEST(VecOps, RmsNorm) {
  test::for_each_target([] {
    for (size_t n : lengths()) {
      auto x = random_vec(n, 3 + n, 4.0f), w = random_vec(n, 5 + n);
      std::vector<float> got(n), want(n), got_nw(n), want_nw(n);
      rmsnorm(x.data(), w.data(), n, 1e-6f, got.data());
      ref::rmsnorm(x.data(), w.data(), n, 1e-6f, want.data());
      rmsnorm(x.data(), nullptr, n, 1e-6f, got_nw.data());
      ref::rmsnorm(x.data(), nullptr, n, 1e-6f, want_nw.data());
      for (size_t i = 0; i < n; ++i) {
        ASSERT_NEAR(got[i], want[i], 2e-6f * (std::fabs(want[i]) + 1e-3f)) << n << " " << i;
        ASSERT_NEAR(got_nw[i], want_nw[i], 2e-6f * (std::fabs(want_nw[i]) + 1e-3f)) << n;
      }
      rmsnorm(x.data(), w.data(), n, 1e-6f, x.data());  // in place
      for (size_t i = 0; i < n; ++i) ASSERT_EQ(x[i], got[i]);
    }
  });
}

TEST(VecOps, SoftmaxIsStableAndAccurate) {
  test::for_each_target([] {
    for (size_t n : lengths()) {
      auto x = random_vec(n, 9 + n, 6.0f);
      x[n / 2] += 1000.0f;  // would overflow without the max subtraction
      auto want = x;
      softmax(x.data(), n);
      ref::softmax(want.data(), n);
      double sum = 0;
      for (size_t i = 0; i < n; ++i) {
        ASSERT_NEAR(x[i], want[i], 4e-7f * want[i] + 1e-37f) << n << " " << i;
        sum += x[i];
      }
      EXPECT_NEAR(sum, 1.0, 1e-5);
    }
    std::vector<float> masked = {1.0f, -std::numeric_limits<float>::infinity(), 1.0f};
    softmax(masked.data(), masked.size());
    EXPECT_EQ(masked[1], 0.0f);
    EXPECT_FLOAT_EQ(masked[0], 0.5f);
  });
}

TEST(VecOps, LogSumExp) {
  test::for_each_target([] {
    for (size_t n : lengths()) {
      auto x = random_vec(n, 31 + n, 8.0f);
      x[0] += 500.0f;
      const double want = ref::logsumexp(x.data(), n);
      EXPECT_NEAR(logsumexp(x.data(), n), want, 1e-6 * std::fabs(want) + 1e-6) << n;
    }
    const float inf = std::numeric_limits<float>::infinity();
    std::vector<float> some = {-inf, 0.0f, -inf, 0.0f};
    EXPECT_NEAR(logsumexp(some.data(), some.size()), std::log(2.0), 1e-6);
    std::vector<float> none = {-inf, -inf};
    EXPECT_EQ(logsumexp(none.data(), none.size()), -inf);
  });
}

TEST(VecOps, SiluMul) {
  test::for_each_target([] {
    for (size_t n : lengths()) {
      auto g = random_vec(n, 11 + n, 5.0f), u = random_vec(n, 13 + n);
      if (n > 3) {
        g[0] = -120.0f;  // exp(-g) beyond f32 range: silu -> -0
        g[1] = 90.0f;
        g[2] = 0.0f;
      }
      std::vector<float> got(n), want(n);
      silu_mul(g.data(), u.data(), got.data(), n);
      ref::silu_mul(g.data(), u.data(), want.data(), n);
      for (size_t i = 0; i < n; ++i)
        ASSERT_NEAR(got[i], want[i], 1e-6f * std::fabs(want[i]) + 1e-30f) << n << " " << i;
    }
  });
}

TEST(VecOps, RopeMatchesTorchRoundingExactly) {
  test::for_each_target([] {
    for (size_t head_dim : {2, 8, 30, 64, 128}) {
      const size_t heads = 3, half = head_dim / 2;
      auto x = random_vec(heads * head_dim, 17 + head_dim);
      auto ang = random_vec(half, 19 + head_dim, 3.0f);
      std::vector<float> c(half), s(half);
      for (size_t i = 0; i < half; ++i) {
        c[i] = std::cos(ang[i]);
        s[i] = std::sin(ang[i]);
      }
      auto want = x;
      rope_rotate_half(x.data(), heads, head_dim, c.data(), s.data());
      ref::rope_rotate_half(want.data(), heads, head_dim, c.data(), s.data());
      EXPECT_EQ(x, want) << head_dim;
    }
  });
}

TEST(VecOps, AttentionScoresAndValues) {
  test::for_each_target([] {
    for (size_t head_dim : {16, 64, 72, 128}) {
      for (size_t n_keys : {1, 5, 33}) {
        const size_t stride = head_dim + 8;  // keys live in a wider cache row
        auto q = random_vec(head_dim, 21 + head_dim), kv = random_vec(n_keys * stride, 23 + n_keys);
        std::vector<float> scores(n_keys);
        attention_scores(q.data(), kv.data(), stride, n_keys, head_dim, 0.125f, scores.data());
        for (size_t t = 0; t < n_keys; ++t) {
          const double want = 0.125 * ref::dot(q.data(), kv.data() + t * stride, head_dim);
          ASSERT_NEAR(scores[t], want, 1e-5 * std::sqrt(double(head_dim))) << t;
        }
        softmax(scores.data(), n_keys);
        std::vector<float> out(head_dim, NAN);
        attention_values(scores.data(), kv.data(), stride, n_keys, head_dim, out.data());
        for (size_t i = 0; i < head_dim; ++i) {
          double want = 0;
          for (size_t t = 0; t < n_keys; ++t) want += double{scores[t]} * kv[t * stride + i];
          ASSERT_NEAR(out[i], want, 1e-5) << head_dim << " " << n_keys << " " << i;
        }
      }
    }
  });
}

}  // namespace
}  // namespace stoa::kernels
