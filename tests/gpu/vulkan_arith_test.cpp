// Engine arithmetic v2's element-wise primitives in GLSL (src/gpu/vulkan/shaders/arith_v2.glsl)
// equal the scalar reference (kernels::v2) bit for bit on the device, for every input class the
// spec names: zeros, denormals of both signs, FLT_MIN and its neighbours, the exp clamps,
// infinities, NaNs with payloads, and sweeps of random bits and of every binade. Whether the
// device flushes denormals or keeps them, the results must not depend on it (the tiny flush).
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <cstdio>
#include <limits>
#include <random>
#include <vector>

#include "gpu/vulkan/arith_check.h"
#include "gpu/vulkan_device.h"
#include "kernels/arith_v2.h"
#include "kernels/half.h"

namespace stoa::gpu::vulkan {
namespace {

std::vector<float> inputs() {
  std::vector<float> v = {0.0f,
                          -0.0f,
                          FLT_MIN,
                          -FLT_MIN,
                          std::nextafter(FLT_MIN, 1.0f),
                          FLT_MAX,
                          -FLT_MAX,
                          1.0f,
                          -1.0f,
                          0.5f,
                          2.0f,
                          3.0f,
                          std::numeric_limits<float>::infinity(),
                          -std::numeric_limits<float>::infinity(),
                          -87.34f,
                          -87.5f,
                          -87.0f,
                          88.72f,
                          88.73f,
                          std::ldexp(1.0f, 126),
                          std::ldexp(1.0f, 127),
                          std::ldexp(1.0f, -125),
                          std::ldexp(1.0f, -63),
                          std::ldexp(1.0f, -25),
                          -std::ldexp(1.0f, -25)};
  for (uint32_t u : {0x00000001u, 0x007fffffu, 0x00400000u, 0x80000001u, 0x807fffffu, 0x7fc00000u,
                     0xffc00001u, 0x7f800001u, 0x7fbfffffu})
    v.push_back(kernels::float_of(u));
  std::mt19937_64 rng(62);
  std::uniform_real_distribution<float> moderate(-100.0f, 100.0f);
  std::uniform_int_distribution<int> binade(-126, 127);
  for (int i = 0; i < 100000; ++i) {
    const uint32_t u = static_cast<uint32_t>(rng());
    switch (i % 4) {
      case 0:  // any bits: NaNs, infinities, denormals, everything
        v.push_back(kernels::float_of(u));
        break;
      case 1:  // small magnitudes: denormal or near the flush line
        v.push_back(kernels::float_of(u & 0x81ffffffu));
        break;
      case 2:  // exp's, sigmoid's and silu's interesting range
        v.push_back(moderate(rng));
        break;
      default:  // every binade evenly
        v.push_back(kernels::float_of((u & 0x807fffffu) |
                                      (static_cast<uint32_t>(binade(rng) + 127) << 23)));
    }
  }
  return v;
}

class VulkanArith : public VulkanDeviceTest {};

TEST_F(VulkanArith, EveryPrimitiveEqualsTheReferenceBitForBit) {
  V2Elementwise ew(*device());
  const std::vector<float> a = inputs();
  // Divisors: the same inputs in another order (so every class meets every class).
  std::vector<float> b(a.size());
  for (size_t i = 0; i < a.size(); ++i) b[i] = a[(i * 7919 + 13) % a.size()];
  const char* names[] = {"flush", "recip", "divide", "rsqrt", "exp", "sigmoid", "silu"};
  for (uint32_t o = 0; o <= static_cast<uint32_t>(V2Op::kSilu); ++o) {
    const V2Op op = static_cast<V2Op>(o);
    const std::vector<uint32_t> got = ew.run(op, a, b);
    size_t differ = 0;
    for (size_t i = 0; i < a.size(); ++i) {
      const uint32_t want = kernels::bits_of(v2_on_host(op, a[i], b[i]));
      if (got[i] != want) {
        if (differ < 5)
          std::printf("  %s(0x%08x%s0x%08x): reference 0x%08x, device 0x%08x\n", names[o],
                      kernels::bits_of(a[i]), op == V2Op::kDivide ? ", " : " ",
                      op == V2Op::kDivide ? kernels::bits_of(b[i]) : 0u, want, got[i]);
        ++differ;
      }
    }
    std::printf("%s: %zu of %zu inputs differ\n", names[o], differ, a.size());
    EXPECT_EQ(differ, 0u) << names[o];
  }
}

// Rows of every width class (under, at and over the 32 lanes, long ones), values of several
// magnitudes (tiny rows whose squares are denormal, huge ones), masked (-inf) positions, and the
// rows the spec makes NaN.
TEST_F(VulkanArith, SoftmaxAndRmsnormRowsEqualTheReferenceBitForBit) {
  V2Rows rows(*device());
  std::mt19937_64 rng(63);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const float inf = std::numeric_limits<float>::infinity();
  for (uint32_t n : {1u, 5u, 31u, 32u, 33u, 100u, 1000u, 4096u}) {
    const uint32_t count = 12;
    std::vector<float> x(static_cast<size_t>(n) * count), weight(n);
    for (uint32_t r = 0; r < count; ++r) {
      const float scale = std::ldexp(1.0f, static_cast<int>(rng() % 160) - 100);
      for (uint32_t i = 0; i < n; ++i) x[r * n + i] = normal(rng) * (r < 4 ? 8.0f : scale);
    }
    if (n > 3) {
      x[1 * n + 2] = -inf;                                     // a masked position
      for (uint32_t i = 0; i < n; ++i) x[2 * n + i] = -inf;    // nothing to attend to
      x[3 * n + 1] = std::numeric_limits<float>::quiet_NaN();  // a NaN row
      x[4 * n + 0] = kernels::float_of(0x00000003u);           // a denormal
    }
    for (float& v : weight) v = 1.0f + 0.1f * normal(rng);
    const float eps = 1e-6f;

    std::vector<uint32_t> got = rows.softmax(x, n);
    size_t differ = 0;
    for (uint32_t r = 0; r < count; ++r) {
      std::vector<float> want(x.begin() + r * n, x.begin() + (r + 1) * n);
      kernels::v2::softmax_row(want.data(), n);
      for (uint32_t i = 0; i < n; ++i) differ += kernels::bits_of(want[i]) != got[r * n + i];
    }
    EXPECT_EQ(differ, 0u) << "softmax_row, n = " << n;

    for (bool with_weight : {false, true}) {
      got = rows.rmsnorm(x, with_weight ? weight : std::vector<float>{}, n, eps);
      differ = 0;
      for (uint32_t r = 0; r < count; ++r) {
        std::vector<float> want(n);
        kernels::v2::rmsnorm_row(x.data() + r * n, with_weight ? weight.data() : nullptr, n, eps,
                                 want.data());
        for (uint32_t i = 0; i < n; ++i) differ += kernels::bits_of(want[i]) != got[r * n + i];
      }
      EXPECT_EQ(differ, 0u) << "rmsnorm_row, n = " << n << (with_weight ? ", weighted" : "");
    }
  }
}

// Attention for several queries against one set of keys and values: head sizes of the models
// and an odd one, key counts under and over the 32 lanes, strided rows, a query scaled to 2^-70
// (every product below the summand flush), one scaled up, values of 1e-35 among the others, and
// a query with a NaN (its row all NaN).
TEST_F(VulkanArith, AttentionEqualsTheReferenceBitForBit) {
  V2Attention attention(*device());
  std::mt19937_64 rng(64);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (uint32_t head_dim : {64u, 128u, 40u}) {
    for (uint32_t n_keys : {1u, 31u, 33u, 257u}) {
      const uint32_t queries = 6, stride = head_dim + 8;
      std::vector<float> q(queries * head_dim), k(n_keys * stride), v(n_keys * stride);
      for (uint32_t r = 0; r < queries; ++r) {
        const float scale = std::ldexp(1.0f, r == 1 ? -70 : (r == 2 ? 6 : 0));
        for (uint32_t i = 0; i < head_dim; ++i) q[r * head_dim + i] = normal(rng) * scale;
      }
      for (float& x : k) x = normal(rng);
      for (float& x : v) x = normal(rng) * (rng() % 7 == 0 ? 1e-35f : 1.0f);
      q[3 * head_dim + 1] = std::numeric_limits<float>::quiet_NaN();
      const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
      const V2Attention::Result got =
          attention.run(q, k, v, n_keys, head_dim, stride, stride, scale);
      size_t differ = 0;
      for (uint32_t r = 0; r < queries; ++r) {
        std::vector<float> probabilities(n_keys), out(head_dim);
        kernels::v2::attention_head(q.data() + r * head_dim, k.data(), stride, v.data(), stride,
                                    n_keys, head_dim, scale, probabilities.data(), out.data());
        for (uint32_t t = 0; t < n_keys; ++t)
          differ += kernels::bits_of(probabilities[t]) != got.probabilities[r * n_keys + t];
        for (uint32_t d = 0; d < head_dim; ++d)
          differ += kernels::bits_of(out[d]) != got.out[r * head_dim + d];
      }
      EXPECT_EQ(differ, 0u) << "head_dim " << head_dim << ", n_keys " << n_keys;
    }
  }
}

// The rest of a pass on the device against kernels::v2, on values of every magnitude class
// (inputs() above: denormals, tiny, huge, NaN, infinities) as well as ordinary ones.
TEST_F(VulkanArith, PassOpsEqualTheReferenceBitForBit) {
  V2PassOps ops(*device());
  const std::vector<float> all = inputs();
  std::mt19937_64 rng(65);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const auto slice = [&](size_t n, size_t at) {
    std::vector<float> v(n);
    for (size_t i = 0; i < n; ++i)
      v[i] = (at % 2) ? normal(rng) : all[(at * 131 + i * 7) % all.size()];
    return v;
  };
  const auto count_differ = [](const std::vector<uint32_t>& got, const std::vector<float>& want) {
    size_t differ = 0;
    for (size_t i = 0; i < want.size(); ++i) differ += got[i] != kernels::bits_of(want[i]);
    return differ;
  };
  for (size_t round = 0; round < 6; ++round) {
    const uint32_t n = 4096;
    const std::vector<float> a = slice(n, round), b = slice(n, round + 1), c = slice(n, round + 2),
                             d = slice(n, round + 3);
    std::vector<float> want(n);
    for (uint32_t i = 0; i < n; ++i) want[i] = kernels::v2::add(a[i], b[i]);
    EXPECT_EQ(count_differ(ops.run(V2PassOp::kAdd, n, 0, 0.0f, a, b, {}, {}), want), 0u) << "add";
    kernels::v2::silu_mul(a.data(), b.data(), want.data(), n);
    EXPECT_EQ(count_differ(ops.run(V2PassOp::kSiluMul, n, 0, 0.0f, a, b, {}, {}), want), 0u)
        << "silu_mul";
    const uint32_t head_dim = 64;
    want = a;
    for (uint32_t h = 0; h < n / head_dim; ++h)
      kernels::v2::rope_apply(want.data() + h * head_dim, head_dim, b.data(), c.data());
    EXPECT_EQ(count_differ(ops.run(V2PassOp::kRope, n, head_dim, 0.0f, a, b, c, {}), want), 0u)
        << "rope";
    const uint32_t hidden = 1024, L = 3;
    std::vector<float> state(b.begin(), b.begin() + (L - 1) * hidden), conv(hidden);
    kernels::v2::short_conv_step(a.data(), hidden, L, state.data(), c.data(), conv.data());
    EXPECT_EQ(count_differ(ops.run(V2PassOp::kShortConv, hidden, L, 0.0f, a, b, c, {}), conv), 0u)
        << "short conv";
    const float weight = round % 2 ? 0.375f : a[5];
    want = d;
    kernels::v2::moe_mix(weight, a.data(), want.data(), n);
    EXPECT_EQ(count_differ(ops.run(V2PassOp::kMoeMix, n, 0, weight, a, {}, {}, d), want), 0u)
        << "moe_mix";
  }
}

}  // namespace
}  // namespace stoa::gpu::vulkan
