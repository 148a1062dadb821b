// The engine's SIMD kernels compute engine arithmetic v2 (docs/design/arithmetic.md): on every
// target, bit for bit equal to the scalar reference kernels::v2, over ordinary values and every
// special class (denormals of both signs, FLT_MIN, values near 2^-100, infinities, NaNs with
// payloads, random bit patterns). A kernel that fused a multiply-add, divided, or skipped a
// flush shows here as a first differing element.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "kernels/arith_v2.h"
#include "kernels/arith_v2_test_util.h"
#include "kernels/half.h"
#include "kernels/matmul_int8.h"
#include "kernels/matmul_int8_packed.h"
#include "kernels/target_loop.h"
#include "kernels/vec_ops.h"

namespace stoa::kernels {
namespace {

// Values of every class a v2 primitive treats apart, then random bits and ordinary values.
std::vector<float> inputs(size_t n, uint64_t seed) {
  std::vector<float> v = {0.0f,
                          -0.0f,
                          float_of(1),
                          float_of(0x807fffffu),
                          float_of(0x00800000u),
                          -float_of(0x00800000u),
                          float_of(0x00800001u),
                          float_of(0x0d7fffffu),
                          float_of(0x0d800000u),
                          -float_of(0x0d800001u),
                          std::numeric_limits<float>::infinity(),
                          -std::numeric_limits<float>::infinity(),
                          float_of(0x7fc00000u),
                          float_of(0xffc00001u),
                          float_of(0x7f800001u),
                          88.72f,
                          88.73f,
                          -87.5f,
                          -87.4f,
                          1e-8f,
                          -1e-8f,
                          30.0f,
                          -30.0f,
                          1.0f,
                          -1.0f,
                          0.5f,
                          3e38f,
                          -3e38f};
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  while (v.size() < n) {
    const uint64_t kind = rng() % 4;
    v.push_back(kind == 0 ? float_of(static_cast<uint32_t>(rng())) : normal(rng));
  }
  v.resize(n);
  return v;
}

// The index of the first element whose bits differ, or -1.
long first_difference(const std::vector<float>& a, const std::vector<float>& b) {
  for (size_t i = 0; i < a.size(); ++i)
    if (bits_of(a[i]) != bits_of(b[i])) return static_cast<long>(i);
  return -1;
}

std::string show(const std::vector<float>& got, const std::vector<float>& want, long at,
                 const std::vector<float>* in = nullptr) {
  if (at < 0) return "";
  char buf[160];
  std::snprintf(buf, sizeof buf, "element %ld: got 0x%08x want 0x%08x (input 0x%08x)", at,
                bits_of(got[at]), bits_of(want[at]), in ? bits_of((*in)[at]) : 0u);
  return buf;
}

TEST(EngineV2Kernels, ElementWiseOpsEqualTheReference) {
  test::for_each_target([] {
    for (size_t n : {1u, 7u, 16u, 33u, 4099u}) {
      const std::vector<float> a = inputs(n, 11 + n), b = inputs(n, 97 + n);
      // SwiGLU.
      std::vector<float> got(n), want(n);
      silu_mul(a.data(), b.data(), got.data(), n);
      v2::silu_mul(a.data(), b.data(), want.data(), n);
      EXPECT_EQ(first_difference(got, want), -1)
          << "silu_mul " << show(got, want, first_difference(got, want), &a);
      // SwiGLU on ordinary gates (whole vectors of them take silu's shorter path).
      {
        std::mt19937_64 rng(n);
        std::normal_distribution<float> gate(0.0f, 4.0f);
        std::vector<float> g(n);
        for (auto& x : g) x = gate(rng);
        silu_mul(g.data(), b.data(), got.data(), n);
        v2::silu_mul(g.data(), b.data(), want.data(), n);
        EXPECT_EQ(first_difference(got, want), -1)
            << "silu_mul " << show(got, want, first_difference(got, want), &g);
      }
      // The residual add.
      got = a;
      residual_add(got.data(), b.data(), n);
      for (size_t i = 0; i < n; ++i) want[i] = v2::add(a[i], b[i]);
      EXPECT_EQ(first_difference(got, want), -1)
          << "residual_add " << show(got, want, first_difference(got, want), &a);
      // MoE mixing, with an ordinary and a tiny weight.
      for (float w : {0.37f, float_of(3u), -2.5e-30f}) {
        got = a;
        want = a;
        mix_add(w, b.data(), got.data(), n);
        v2::moe_mix(w, b.data(), want.data(), n);
        EXPECT_EQ(first_difference(got, want), -1)
            << "mix_add " << show(got, want, first_difference(got, want), &b);
      }
      // RMSNorm, with and without a weight.
      for (const float* weight : {b.data(), static_cast<const float*>(nullptr)}) {
        rmsnorm(a.data(), weight, n, 1e-6f, got.data());
        v2::rmsnorm_row(a.data(), weight, n, 1e-6f, want.data());
        EXPECT_EQ(first_difference(got, want), -1)
            << "rmsnorm " << show(got, want, first_difference(got, want), &a);
      }
      // Ordinary rows too: a row with a NaN or an infinity is all NaN either way.
      std::vector<float> row = inputs(n + 40, 5 + n);
      row.erase(row.begin(), row.begin() + 40);
      for (auto& x : row) x = (bits_of(x) & 0x7fffffffu) >= 0x7f800000u ? 1.5f : x;
      rmsnorm(row.data(), b.data(), n, 1e-5f, got.data());
      v2::rmsnorm_row(row.data(), b.data(), n, 1e-5f, want.data());
      EXPECT_EQ(first_difference(got, want), -1)
          << "rmsnorm " << show(got, want, first_difference(got, want), &row);
      // RoPE over 3 heads of 2n values (cos / sin: the first n of a and b).
      {
        std::vector<float> heads = inputs(6 * n, 41 + n), want_heads = heads;
        rope_rotate_half(heads.data(), 3, 2 * n, a.data(), b.data());
        for (size_t h = 0; h < 3; ++h)
          v2::rope_apply(want_heads.data() + h * 2 * n, 2 * n, a.data(), b.data());
        EXPECT_EQ(first_difference(heads, want_heads), -1)
            << "rope " << show(heads, want_heads, first_difference(heads, want_heads));
      }
      // A gate product.
      mul_flush(a.data(), b.data(), got.data(), n);
      for (size_t i = 0; i < n; ++i) want[i] = v2::flush(v2::flush(a[i]) * v2::flush(b[i]));
      EXPECT_EQ(first_difference(got, want), -1)
          << "mul_flush " << show(got, want, first_difference(got, want), &a);
    }
  });
}

TEST(EngineV2Kernels, SoftmaxEqualsTheReference) {
  test::for_each_target([] {
    std::mt19937_64 rng(5);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    for (size_t n : {1u, 2u, 31u, 32u, 33u, 100u, 1000u, 4097u}) {
      for (int kind = 0; kind < 6; ++kind) {
        std::vector<float> row(n);
        for (auto& x : row) {
          const float scale = kind == 1 ? 1e-30f : kind == 2 ? 60.0f : 4.0f;
          x = normal(rng) * scale;
        }
        if (kind == 3)  // masked entries (causal attention) and denormals
          for (size_t i = 0; i < n; i += 3)
            row[i] = i % 2 ? -std::numeric_limits<float>::infinity() : float_of(5u);
        if (kind == 4) row[n / 2] = float_of(0x7fc00123u);  // a NaN: the row is NaN
        if (kind == 5)
          for (auto& x : row) x = -std::numeric_limits<float>::infinity();
        std::vector<float> got = row, want = row;
        softmax(got.data(), n);
        v2::softmax_row(want.data(), n);
        const long at = first_difference(got, want);
        EXPECT_EQ(at, -1) << "n " << n << " kind " << kind << " " << show(got, want, at, &row);
      }
    }
  });
}

TEST(EngineV2Kernels, AttentionEqualsTheReference) {
  test::for_each_target([] {
    std::mt19937_64 rng(9);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    for (size_t head_dim : {40u, 64u, 128u}) {
      for (size_t n_keys : {1u, 5u, 33u, 257u}) {
        const size_t stride = head_dim + 8;
        std::vector<float> q(head_dim), k(n_keys * stride), v(n_keys * stride);
        for (auto& x : q) x = normal(rng);
        for (auto& x : k) x = normal(rng);
        for (auto& x : v) x = normal(rng);
        v[2] = 1e-31f;  // a value product near 2^-100, a tiny query product
        q[5] = 1e-35f;
        // The kernels' precondition: flushed inputs (the engine's Q, K, V are RoPE's and the
        // W8A8 product's outputs).
        for (auto* t : {&q, &k, &v})
          for (auto& x : *t) x = v2::flush(x);
        const float scale = 1.0f / 8.0f;
        std::vector<float> scores(n_keys), out(head_dim), want_scores(n_keys), want(head_dim);
        attention_scores(q.data(), k.data(), stride, n_keys, head_dim, scale, scores.data());
        softmax(scores.data(), n_keys);
        attention_values(scores.data(), v.data(), stride, n_keys, head_dim, out.data());
        v2::attention_head(q.data(), k.data(), stride, v.data(), stride, n_keys, head_dim, scale,
                           want_scores.data(), want.data());
        EXPECT_EQ(first_difference(scores, want_scores), -1) << head_dim << " " << n_keys;
        EXPECT_EQ(first_difference(out, want), -1)
            << head_dim << " " << n_keys << " " << show(out, want, first_difference(out, want));
      }
    }
  });
}

// With the caches' floors (the engine passes Sequence::LayerState's) the kernels skip summand
// flushes that cannot change a term: the bits stay v2's. Rows where a flush does change a result
// (every term of a score, or of one output value, below 2^-100) must still take it.
TEST(EngineV2Kernels, MinNonzeroMagnitudeIsTheFloorOfAKvCache) {
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> mixed = {0.0f, -0.0f, -3.0f, float_of(0x7fc00000u), inf, -inf, 2.5f};
  EXPECT_EQ(min_nonzero_magnitude(mixed.data(), mixed.size()), 2.5f);
  const std::vector<float> zeros = {0.0f, -0.0f, 0.0f};
  EXPECT_EQ(min_nonzero_magnitude(zeros.data(), zeros.size()), inf);
  EXPECT_EQ(min_nonzero_magnitude(zeros.data(), 0), inf);
  const std::vector<float> tiny = {1.0f, -float_of(1u), float_of(0x00800000u)};
  EXPECT_EQ(bits_of(min_nonzero_magnitude(tiny.data(), tiny.size())), 1u);
  // And max_magnitude, the ceiling: +inf for an infinity or a NaN, 0 for nothing.
  EXPECT_EQ(max_magnitude(mixed.data(), mixed.size()), inf);
  const std::vector<float> nan_only = {1.0f, float_of(0xffc00000u)};
  EXPECT_EQ(max_magnitude(nan_only.data(), nan_only.size()), inf);
  const std::vector<float> finite = {1.0f, -7.5f, float_of(0x7f7fffffu), 0.0f};
  EXPECT_EQ(bits_of(max_magnitude(finite.data(), 2)), bits_of(7.5f));
  EXPECT_EQ(bits_of(max_magnitude(finite.data(), finite.size())), 0x7f7fffffu);
  EXPECT_EQ(max_magnitude(finite.data(), 0), 0.0f);
}

TEST(EngineV2Kernels, AttentionFloorsChangeTheWorkNotTheBits) {
  test::for_each_target([] {
    std::mt19937_64 rng(13);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    for (size_t head_dim : {40u, 128u}) {
      for (bool tiny_scores : {false, true}) {
        const size_t n_keys = 37, stride = head_dim;
        std::vector<float> q(head_dim), k(n_keys * stride), v(n_keys * stride);
        for (auto& x : q) x = normal(rng);
        for (auto& x : k) x = normal(rng);
        for (auto& x : v) x = normal(rng);
        // Key 0 dominates (p ~ 1), key 1 is e^-80 below it (p ~ 2^-115: its products with
        // ordinary values are flushed), key 2 e^-60 below (p ~ 2^-87: not flushed), the rest
        // underflow to p = 0. Value 3 of key 0 is 0, so output 3 is key 1's flushed term alone.
        float qq = 0.0f;
        for (float x : q) qq = qq + x * x;
        const float scale = 1.0f / 8.0f;
        for (size_t d = 0; d < head_dim; ++d) {
          k[d] = q[d] * (4000.0f / (qq * scale));
          k[stride + d] = q[d] * (3920.0f / (qq * scale));
          k[2 * stride + d] = q[d] * (3940.0f / (qq * scale));
        }
        v[3] = 0.0f;
        v[2 * stride + 3] = 0.0f;
        if (tiny_scores) {
          // Every product of key 4 with the query below 2^-100: its score is flushed to +0.
          for (auto& x : q) x = x * 1e-16f;
          for (size_t d = 0; d < head_dim; ++d) k[4 * stride + d] = 1e-16f;
        }
        for (auto* t : {&q, &k, &v})
          for (auto& x : *t) x = v2::flush(x);
        const float key_floor = min_nonzero_magnitude(k.data(), k.size());
        const float value_floor = min_nonzero_magnitude(v.data(), v.size());
        std::vector<float> scores(n_keys), out(head_dim), want_scores(n_keys), want(head_dim);
        attention_scores(q.data(), k.data(), stride, n_keys, head_dim, scale, scores.data(),
                         key_floor);
        // The raw scores too: softmax would hide a score of 1e-31 that should have been +0.
        for (size_t t = 0; t < n_keys; ++t) {
          const float want_score =
              v2::flush(v2::dot(q.data(), k.data() + t * stride, head_dim) * scale);
          ASSERT_EQ(bits_of(scores[t]), bits_of(want_score)) << "score " << t;
        }
        if (tiny_scores) {
          EXPECT_EQ(bits_of(scores[4]), 0u);  // every product flushed
        }
        softmax(scores.data(), n_keys);
        // Every value finite: a key of weight 0 (key 5) is skipped.
        attention_values(scores.data(), v.data(), stride, n_keys, head_dim, out.data(), value_floor,
                         max_magnitude(v.data(), v.size()));
        v2::attention_head(q.data(), k.data(), stride, v.data(), stride, n_keys, head_dim, scale,
                           want_scores.data(), want.data());
        EXPECT_EQ(first_difference(scores, want_scores), -1) << head_dim << " " << tiny_scores;
        EXPECT_EQ(first_difference(out, want), -1) << head_dim << " " << tiny_scores << " "
                                                   << show(out, want, first_difference(out, want));
        if (!tiny_scores) {
          // The case is what it says: p spans the three regimes, and output 3 was flushed.
          EXPECT_GT(want_scores[0], 0.99f);
          EXPECT_GT(want_scores[1], 0.0f);
          EXPECT_LT(want_scores[1], 0x1p-100f);
          EXPECT_GT(want_scores[2], 0x1p-100f);
          EXPECT_EQ(want_scores[5], 0.0f);
          EXPECT_EQ(bits_of(want[3]), 0u);  // key 1's term alone, flushed (p1 * v < 2^-100)
          EXPECT_NE(v[stride + 3], 0.0f);
          // An infinite value under a key of weight 0: 0 * inf is a NaN the reference carries
          // to the output, so the cache's ceiling (+inf now) keeps that key from being skipped.
          v[5 * stride + 1] = std::numeric_limits<float>::infinity();
          const float ceiling = max_magnitude(v.data(), v.size());
          EXPECT_EQ(ceiling, std::numeric_limits<float>::infinity());
          attention_values(scores.data(), v.data(), stride, n_keys, head_dim, out.data(),
                           value_floor, ceiling);
          v2::attention_head(q.data(), k.data(), stride, v.data(), stride, n_keys, head_dim, scale,
                             want_scores.data(), want.data());
          EXPECT_TRUE(std::isnan(want[1]));
          EXPECT_EQ(first_difference(out, want), -1)
              << head_dim << " " << show(out, want, first_difference(out, want));
        }
      }
    }
  });
}

TEST(EngineV2Kernels, QuantizeAndMatmulEqualTheReference) {
  test::for_each_target([] {
    std::mt19937_64 rng(21);
    for (int64_t batch : {1, 3, 8}) {
      RandomQ8 m = random_q8(rng, 70, 256, batch);
      // Special blocks: denormals beside a normal amax, a NaN, an infinity, all tiny.
      m.x[0] = float_of(0x00400000u);
      m.x[1] = 1e-37f;
      m.x[40] = float_of(0x7fc00001u);
      m.x[70] = -std::numeric_limits<float>::infinity();
      for (int i = 96; i < 128; ++i)
        m.x[static_cast<size_t>(i)] = float_of(static_cast<uint32_t>(i));
      const int64_t groups = m.cols / 32;
      // Row 5, block 2: zero weights under an infinite scale, so 0 * inf makes the row's outputs
      // NaN (on x86 the default NaN 0xffc00000, which the kernels must make canonical).
      std::fill(m.wq.begin() + 5 * m.cols + 64, m.wq.begin() + 5 * m.cols + 96, int8_t{0});
      m.ws[static_cast<size_t>(5 * groups + 2)] = 0x7c00;
      std::vector<int8_t> q(m.x.size());
      std::vector<float> d(static_cast<size_t>(batch * groups));
      std::vector<int32_t> sums(d.size());
      const Q8Activations got_acts{q.data(), d.data(), batch, m.cols, sums.data()};
      quantize_activations_q8(m.x.data(), m.cols, got_acts);
      v2::quantize_q8(m.x.data(), m.cols, m.acts());
      EXPECT_EQ(q, m.xq);
      EXPECT_EQ(first_difference(d, m.xd), -1) << show(d, m.xd, first_difference(d, m.xd));
      EXPECT_EQ(sums, m.xsums);
      std::vector<float> want(static_cast<size_t>(batch * m.rows)), got(want.size());
      v2::matvec_q8(m.weights(), m.acts(), want.data(), m.rows);
      EXPECT_EQ(bits_of(want[5]), v2::kCanonicalNanBits);
      matmul_w8a8(m.weights(), got_acts, got.data(), m.rows, 0, m.rows);
      EXPECT_EQ(first_difference(got, want), -1)
          << "grid " << show(got, want, first_difference(got, want));
      const PackedInt8 packed = PackedInt8::pack(m.weights());
      std::fill(got.begin(), got.end(), 0.0f);
      matmul_w8a8_packed(packed, got_acts, got.data(), m.rows, 0, m.rows);
      EXPECT_EQ(first_difference(got, want), -1)
          << "packed " << show(got, want, first_difference(got, want));
    }
  });
}

}  // namespace
}  // namespace stoa::kernels
