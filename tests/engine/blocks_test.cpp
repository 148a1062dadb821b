// The building blocks on hand-computed cases: short conv, GQA head mapping, attention core,
// RoPE, RMSNorm, MoE routing.
#include <gtest/gtest.h>

#include <cmath>

#include "engine/attention.h"
#include "engine/moe.h"
#include "engine/ops.h"
#include "engine/short_conv.h"
#include "engine/swiglu.h"

namespace stoa::engine {
namespace {

Linear f32_linear(int64_t rows, int64_t cols, std::vector<float> values) {
  return Linear::from_f32(Tensor::from_f32({rows, cols}, values));
}

Linear identity(int64_t n) {
  std::vector<float> v(static_cast<size_t>(n * n), 0.0f);
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i * n + i)] = 1;
  return f32_linear(n, n, v);
}

// A config with `layers` layers of one kind, for building sequences by hand.
ModelConfig hand_config(LayerKind kind, int64_t hidden, int64_t heads, int64_t kv_heads,
                        int64_t head_dim, int64_t conv_kernel = 3) {
  ModelConfig c;
  c.arch = kind == LayerKind::kConv ? Arch::kLfm2 : Arch::kQwen3;
  c.hidden_size = hidden;
  c.num_layers = 1;
  c.num_heads = heads;
  c.num_kv_heads = kv_heads;
  c.head_dim = head_dim;
  c.conv_kernel = conv_kernel;
  c.layer_kinds = {kind};
  c.vocab_size = 8;
  return c;
}

Batch one_segment(Sequence& seq, int64_t n) {
  Batch b;
  for (int64_t i = 0; i < n; ++i) {
    b.tokens.push_back(0);
    b.positions.push_back(seq.length() + i);
  }
  b.segments.push_back({&seq, 0, n});
  return b;
}

TEST(ShortConv, HandComputed) {
  // H = 2, L = 3. in_proj maps x to B = x, C = x, x = x, so Bx = x^2 and y = x * conv(x^2).
  std::vector<float> in(6 * 2, 0.0f);
  for (int r = 0; r < 6; ++r) in[static_cast<size_t>(r * 2 + r % 2)] = 1;
  Linear in_proj = f32_linear(6, 2, in), out_proj = identity(2);
  // kernel[h] = {k0, k1, k2}; k2 multiplies the newest input.
  const float kernel[] = {1,  2, 3,      // channel 0
                          -1, 0, 0.5f};  // channel 1
  ShortConvWeights w{&in_proj, &out_proj, kernel, 2, 3};
  ThreadPool pool(2);
  const float x[] = {1, 2,   // t0
                     3, -1,  // t1
                     2, 1};  // t2
  // u = x^2: t0 (1, 4), t1 (9, 1), t2 (4, 1).
  // ch0: t0 3*1 = 3;        t1 2*1 + 3*9 = 29;      t2 1*1 + 2*9 + 3*4 = 31
  // ch1: t0 0.5*4 = 2;      t1 0*4 + 0.5*1 = 0.5;   t2 -1*4 + 0 + 0.5*1 = -3.5
  // y = x * conv: t0 (3, 4); t1 (87, -0.5); t2 (62, -3.5)
  const float expected[] = {3, 4, 87, -0.5f, 62, -3.5f};
  ModelConfig c = hand_config(LayerKind::kConv, 2, 1, 1, 2);

  Sequence whole(c, 8);
  Batch b = one_segment(whole, 3);
  float out[6];
  short_conv_block(w, 0, b, x, out, pool);
  for (int i = 0; i < 6; ++i) EXPECT_FLOAT_EQ(out[i], expected[i]) << i;
  // The state holds the last L-1 = 2 inputs, oldest first: u(t1), u(t2).
  EXPECT_EQ(whole.layer(0).conv, (std::vector<float>{9, 1, 4, 1}));

  // Token by token through the state gives the same.
  Sequence steps(c, 8);
  for (int t = 0; t < 3; ++t) {
    Batch bt = one_segment(steps, 1);
    float o[2];
    short_conv_block(w, 0, bt, x + 2 * t, o, pool);
    EXPECT_FLOAT_EQ(o[0], expected[2 * t]);
    EXPECT_FLOAT_EQ(o[1], expected[2 * t + 1]);
    int32_t tok = 0;
    steps.commit(&tok, 1);
  }
}

TEST(Attention, CoreHandComputed) {
  const float q[] = {1, 0};
  const float keys[] = {1, 0, 0, 1};
  const float values[] = {1, 2, 3, 4};
  float scores[2], out[2];
  attend(q, keys, values, 2, 2, 2, scores, out);
  const double s0 = 1 / std::sqrt(2.0);
  const double p0 = std::exp(s0) / (std::exp(s0) + 1);
  EXPECT_NEAR(out[0], p0 * 1 + (1 - p0) * 3, 1e-6);
  EXPECT_NEAR(out[1], p0 * 2 + (1 - p0) * 4, 1e-6);
}

TEST(Attention, GqaHeadMapping) {
  // hidden 8, 4 query heads, 2 kv heads, head_dim 2. With one token the softmax is 1, so each
  // head's output is the value of the kv head it reads: heads 0,1 -> kv 0, heads 2,3 -> kv 1
  // (Hugging Face repeat_kv), not h % kv_heads.
  Linear q = identity(8), o = identity(8);
  std::vector<float> kv(4 * 8, 0.0f);
  for (int r = 0; r < 4; ++r) kv[static_cast<size_t>(r * 8 + r)] = 1;  // k = v = x[0:4]
  Linear k = f32_linear(4, 8, kv), v = f32_linear(4, 8, kv);
  const float ones[] = {1, 1};
  AttentionWeights w{&q, &k, &v, &o, ones, ones, 4, 2, 2, 1e-6, 1e6};
  ModelConfig c = hand_config(LayerKind::kAttention, 8, 4, 2, 2);
  Sequence seq(c, 4);
  Batch b = one_segment(seq, 1);
  ThreadPool pool(2);
  const float x[] = {1, 2, 3, 4, 5, 6, 7, 8};
  float out[8];
  attention_block(w, 0, b, x, out, pool);
  const float expected[] = {1, 2, 1, 2, 3, 4, 3, 4};
  for (int i = 0; i < 8; ++i) EXPECT_FLOAT_EQ(out[i], expected[i]) << i;
  ASSERT_EQ(seq.layer(0).keys.size(), 4u);
}

TEST(Ops, RopeRotateHalf) {
  // head_dim 4, theta 10000, position 3: pair (x0, x2) turns by 3 rad, (x1, x3) by 3 * 0.01.
  float h[] = {1, 2, 3, 4};
  rope_rotate_half(h, 4, 3, 10000.0);
  EXPECT_NEAR(h[0], 1 * std::cos(3.0) - 3 * std::sin(3.0), 1e-6);
  EXPECT_NEAR(h[2], 3 * std::cos(3.0) + 1 * std::sin(3.0), 1e-6);
  EXPECT_NEAR(h[1], 2 * std::cos(0.03) - 4 * std::sin(0.03), 1e-6);
  EXPECT_NEAR(h[3], 4 * std::cos(0.03) + 2 * std::sin(0.03), 1e-6);
  float z[] = {1, 2, 3, 4};
  rope_rotate_half(z, 4, 0, 10000.0);  // position 0 is the identity
  EXPECT_EQ(z[0], 1);
  EXPECT_EQ(z[3], 4);
}

TEST(Ops, RmsNorm) {
  const float x[] = {3, 4};
  const float w[] = {1, 2};
  float out[2];
  rms_norm(x, w, 2, 0.0, out);  // rms = sqrt(12.5)
  EXPECT_NEAR(out[0], 3 / std::sqrt(12.5), 1e-6);
  EXPECT_NEAR(out[1], 8 / std::sqrt(12.5), 1e-6);
}

double sigmoid(double x) {
  return 1 / (1 + std::exp(-x));
}

TEST(Moe, BiasChangesSelectionNotWeights) {
  const float logits[] = {2, 1, 0, -1};
  int32_t experts[2];
  float weights[2];
  // Without bias: experts 0 and 1, weighted by their normalised sigmoids.
  moe_route(logits, 4, nullptr, 2, true, 1.0, experts, weights);
  EXPECT_EQ(experts[0], 0);
  EXPECT_EQ(experts[1], 1);
  double s0 = sigmoid(2), s1 = sigmoid(1), s3 = sigmoid(-1);
  EXPECT_NEAR(weights[0], s0 / (s0 + s1), 1e-6);
  EXPECT_NEAR(weights[1], s1 / (s0 + s1), 1e-6);
  // A bias of +1 on expert 3 lifts its routing score to 1.27 > sigmoid(2): it is chosen first,
  // but mixed with its raw sigmoid, not the biased score.
  const float bias[] = {0, 0, 0, 1};
  moe_route(logits, 4, bias, 2, true, 1.0, experts, weights);
  EXPECT_EQ(experts[0], 3);
  EXPECT_EQ(experts[1], 0);
  EXPECT_NEAR(weights[0], s3 / (s3 + s0), 1e-6);
  EXPECT_NEAR(weights[1], s0 / (s3 + s0), 1e-6);
  EXPECT_NEAR(weights[0] + weights[1], 1.0, 1e-5);
  // Without normalisation, times the scaling factor.
  moe_route(logits, 4, bias, 2, false, 2.5, experts, weights);
  EXPECT_NEAR(weights[0], 2.5 * s3, 1e-6);
  EXPECT_NEAR(weights[1], 2.5 * s0, 1e-6);
}

TEST(Moe, FfnIsWeightedSumOfChosenExperts) {
  // hidden 2, 3 experts of width 2, top-2. The router is the identity on (x0, x1) plus a row
  // of zeros, so with x = (2, -1): logits (2, -1, 0) -> experts 0 and 2.
  Linear router = f32_linear(3, 2, {1, 0, 0, 1, 0, 0});
  std::vector<Linear> mats;
  mats.reserve(9);
  for (int e = 0; e < 3; ++e) {
    float s = static_cast<float>(e + 1);
    mats.push_back(f32_linear(2, 2, {s, 0, 0, s}));  // gate
    mats.push_back(f32_linear(2, 2, {1, 0, 0, 1}));  // up
    mats.push_back(f32_linear(2, 2, {0, s, s, 0}));  // down (swap, scale)
  }
  MoeWeights w;
  w.router = &router;
  for (int e = 0; e < 3; ++e)
    w.experts.push_back({&mats[3 * e], &mats[3 * e + 1], &mats[3 * e + 2]});
  w.top_k = 2;
  ThreadPool pool(2);
  const float x[] = {2, -1};
  float out[2];
  moe_ffn(w, x, 1, 2, out, pool);
  auto silu = [](double v) { return v / (1 + std::exp(-v)); };
  auto expert = [&](int e, int i) {  // output i of expert e
    double s = e + 1;
    int j = 1 - i;  // down swaps the two channels
    return s * silu(s * x[j]) * x[j];
  };
  double w0 = sigmoid(2), w2 = sigmoid(0), n = w0 + w2;
  for (int i = 0; i < 2; ++i) {
    EXPECT_NEAR(out[i], w0 / n * expert(0, i) + w2 / n * expert(2, i), 1e-5) << i;
  }
}

}  // namespace
}  // namespace stoa::engine
