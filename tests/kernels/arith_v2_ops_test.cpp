// Engine arithmetic v2's remaining pass operations (kernels/arith_v2_ops.cpp): on ordinary
// values they are the engine's scalar code bit for bit (the same products and sums in the same
// order: the flushes change nothing there), and the router weights are close to double.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/arith_v2.h"
#include "kernels/half.h"

namespace stoa::kernels {
namespace {

std::vector<float> normal_values(std::mt19937_64& rng, size_t n, float scale = 1.0f) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = normal(rng) * scale;
  return v;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

TEST(ArithV2Ops, EqualTheEngineOrderOnOrdinaryValues) {
  std::mt19937_64 rng(65);
  // RoPE: engine/ops.cpp's rope_apply.
  for (size_t head_dim : {64, 128}) {
    std::vector<float> head = normal_values(rng, head_dim), c = normal_values(rng, head_dim / 2),
                       s = normal_values(rng, head_dim / 2), want = head;
    for (size_t i = 0; i < head_dim / 2; ++i) {
      const float a = want[i], b = want[i + head_dim / 2];
      want[i] = a * c[i] - b * s[i];
      want[i + head_dim / 2] = b * c[i] + a * s[i];
    }
    v2::rope_apply(head.data(), head_dim, c.data(), s.data());
    EXPECT_TRUE(same_bits(head, want)) << "rope, head_dim " << head_dim;
  }
  // LFM2's short conv: engine/short_conv.cpp's short_conv_step, state shift included.
  {
    const size_t hidden = 96, L = 3;
    const std::vector<float> kernel = normal_values(rng, hidden * L),
                             bx = normal_values(rng, hidden);
    std::vector<float> state = normal_values(rng, (L - 1) * hidden), state_want = state;
    std::vector<float> out(hidden), want(hidden);
    for (size_t h = 0; h < hidden; ++h) {
      float acc = 0;
      for (size_t j = 0; j + 1 < L; ++j) acc += kernel[h * L + j] * state_want[j * hidden + h];
      acc += kernel[h * L + L - 1] * bx[h];
      want[h] = acc;
    }
    std::copy(state_want.begin() + hidden, state_want.end(), state_want.begin());
    std::copy(bx.begin(), bx.end(), state_want.begin() + (L - 2) * hidden);
    v2::short_conv_step(kernel.data(), hidden, L, state.data(), bx.data(), out.data());
    EXPECT_TRUE(same_bits(out, want)) << "short conv";
    EXPECT_TRUE(same_bits(state, state_want)) << "short conv's window";
  }
  // MoE mixing over three experts in order (engine/moe.cpp's moe_ffn), residual adds, SwiGLU.
  {
    const size_t hidden = 80;
    std::vector<float> out(hidden, 0.0f), want(hidden, 0.0f);
    for (int e = 0; e < 3; ++e) {
      const std::vector<float> y = normal_values(rng, hidden);
      const float w = 0.25f + 0.125f * static_cast<float>(e);
      for (size_t h = 0; h < hidden; ++h) want[h] += w * y[h];
      v2::moe_mix(w, y.data(), out.data(), hidden);
    }
    EXPECT_TRUE(same_bits(out, want)) << "moe mix";
    const std::vector<float> a = normal_values(rng, hidden), b = normal_values(rng, hidden);
    for (size_t h = 0; h < hidden; ++h) EXPECT_EQ(v2::add(a[h], b[h]), a[h] + b[h]);
    std::vector<float> g = normal_values(rng, hidden, 4.0f), u = normal_values(rng, hidden),
                       swiglu(hidden);
    v2::silu_mul(g.data(), u.data(), swiglu.data(), hidden);
    for (size_t h = 0; h < hidden; ++h) EXPECT_EQ(swiglu[h], v2::silu(g[h]) * u[h]);
  }
}

TEST(ArithV2Ops, RouterWeightsAgainstDouble) {
  std::mt19937_64 rng(66);
  const std::vector<float> logits = normal_values(rng, 32, 3.0f);
  const int32_t chosen[] = {3, 17, 9, 30};
  for (bool normalize : {false, true}) {
    float weights[4];
    v2::moe_weights(logits.data(), chosen, 4, normalize, 2.5f, weights);
    double sig[4], sum = 0;
    for (int i = 0; i < 4; ++i) sum += sig[i] = 1.0 / (1.0 + std::exp(-double{logits[chosen[i]]}));
    for (int i = 0; i < 4; ++i) {
      const double want = (normalize ? sig[i] / (sum + 1e-6) : sig[i]) * 2.5;
      EXPECT_NEAR(weights[i], want, 4e-7 * want) << i << (normalize ? " normalized" : "");
    }
  }
}

}  // namespace
}  // namespace stoa::kernels
