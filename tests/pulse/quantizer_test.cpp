#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "core/int8_grid.h"
#include "pulse/quantizer.h"
#include "pulse_test_util.h"

namespace stoa::pulse {
namespace {

std::vector<float> normal_matrix(int64_t rows, int64_t cols, uint64_t seed) {
  std::vector<float> w(static_cast<size_t>(rows * cols));
  uint64_t s = seed * 0x9e3779b97f4a7c15ull + 1;
  for (auto& x : w) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    x = (static_cast<float>(s >> 40) / 16777216.0f - 0.5f) * 0.08f;
  }
  return w;
}

TEST(PulseQuantizer, FreshGridIsTheQ8ZeroGridAndNormsAreBf16) {
  auto w = normal_matrix(8, 64, 1);
  std::vector<float> norm = {1.0f, 0.99f, 1.0078125f, 1.5f};
  WeightViews views;
  views["a.weight"] = TensorView(w.data(), DType::kF32, {8, 64});
  views["a.norm"] = TensorView(norm.data(), DType::kF32, {4});
  Int8Quantizer q;
  Int8State s = q.quantize(views, 3);
  EXPECT_EQ(s.version(), 3u);
  Int8Matrix ref = int8_quantize(w.data(), 8, 64);
  const StateTensor& t = s.at("a.weight");
  ASSERT_EQ(t.kind, TensorKind::kInt8);
  EXPECT_EQ(t.q.values, ref.values);
  EXPECT_EQ(t.q.scales, ref.scales);
  const StateTensor& n = s.at("a.norm");
  ASSERT_EQ(n.kind, TensorKind::kBf16);
  for (size_t i = 0; i < norm.size(); ++i) EXPECT_EQ(n.bf16[i], f32_to_bf16(norm[i]));
  EXPECT_EQ(s.nbytes(), 8u * 64 + 16 * 2 + 4 * 2);
}

TEST(PulseQuantizer, ScalesStayFrozenUnderSmallUpdates) {
  auto w = normal_matrix(16, 128, 2);
  WeightViews views;
  views["w"] = TensorView(w.data(), DType::kF32, {16, 128});
  Int8Quantizer q;
  Int8State s0 = q.quantize(views, 0);
  for (auto& x : w) x *= 0.999f;  // shrinks every group a little: below the rescale threshold
  QuantizeStats stats;
  Int8State s1 = q.quantize(views, 1, &stats);
  EXPECT_EQ(s1.at("w").q.scales, s0.at("w").q.scales);
  EXPECT_EQ(stats.rescaled_clip + stats.rescaled_shrink, 0);
  EXPECT_EQ(stats.groups, 16 * 4);
  // Values are the frozen-scale quantisation of the new weights.
  Int8Matrix ref = int8_quantize_with_scales(w.data(), 16, 128, s0.at("w").q.scales);
  EXPECT_EQ(s1.at("w").q.values, ref.values);
  EXPECT_NE(Int8Matrix(int8_quantize(w.data(), 16, 128)).scales, s0.at("w").q.scales);
}

TEST(PulseQuantizer, RescaleRuleBoundaries) {
  uint16_t s = f32_to_f16(0.001f);
  float sf = f16_to_f32(s);
  RescaleRule rule;
  EXPECT_FALSE(should_rescale(127.0f * sf, s, f32_to_f16(127.0f * sf / 127.0f), rule));
  EXPECT_FALSE(should_rescale(127.49f * sf, s, s, rule));
  EXPECT_TRUE(should_rescale(127.5f * sf, s, s, rule));  // rounds to 128: would clip
  EXPECT_TRUE(should_rescale(200.0f * sf, s, f32_to_f16(200.0f * sf / 127.0f), rule));
  EXPECT_FALSE(should_rescale(64.0f * sf, s, f32_to_f16(sf * 0.51f), rule));
  EXPECT_TRUE(should_rescale(60.0f * sf, s, f32_to_f16(sf * 0.45f), rule));  // range halved
  EXPECT_TRUE(should_rescale(0.1f, 0, f32_to_f16(0.1f / 127), rule));        // zero grew
  EXPECT_FALSE(should_rescale(0.0f, 0, 0, rule));
}

TEST(PulseQuantizer, ClippingAndShrinkingGroupsAreRescaledOthersNot) {
  auto w = normal_matrix(4, 96, 3);
  WeightViews views;
  views["w"] = TensorView(w.data(), DType::kF32, {4, 96});
  Int8Quantizer q;
  Int8State s0 = q.quantize(views, 0);
  w[5] = 0.2f;  // group 0 of row 0 (|w| < 0.04 before): a value would clip
  for (int i = 0; i < 32; ++i) w[96 + 32 + i] *= 0.25f;  // row 1, group 1: range shrinks 4x
  QuantizeStats stats;
  Int8State s1 = q.quantize(views, 1, &stats);
  EXPECT_EQ(stats.rescaled_clip, 1);
  EXPECT_EQ(stats.rescaled_shrink, 1);
  const auto& a = s0.at("w").q.scales;
  const auto& b = s1.at("w").q.scales;
  for (size_t g = 0; g < a.size(); ++g) {
    if (g == 0 || g == 4)
      EXPECT_EQ(b[g], int8_group_scale(w.data() + g * 32)) << g;
    else
      EXPECT_EQ(b[g], a[g]) << g;
  }
  // The rescaled scale is frozen from now on.
  Int8State s2 = q.quantize(views, 2, &stats);
  EXPECT_EQ(s2.at("w").q.scales, b);
  EXPECT_EQ(stats.rescaled_clip + stats.rescaled_shrink, 0);
}

TEST(PulseQuantizer, RefusesNonFiniteWeightsAndGridChanges) {
  auto w = normal_matrix(2, 32, 4);
  WeightViews views;
  views["w"] = TensorView(w.data(), DType::kF32, {2, 32});
  Int8Quantizer q;
  q.quantize(views, 0);
  w[7] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_THROW(q.quantize(views, 1), Error);
  w[7] = 0.0f;
  WeightViews other;
  other["x"] = views["w"];
  EXPECT_THROW(q.quantize(other, 1), Error);
  std::vector<float> n = {1.0f, std::numeric_limits<float>::infinity()};
  views["n"] = TensorView(n.data(), DType::kF32, {2});
  Int8Quantizer fresh;
  EXPECT_THROW(fresh.quantize(views, 0), Error);
}

TEST(PulseQuantizer, ThreadPoolGivesTheSameBits) {
  AdamSimulator sim(sim_layout_tiny(), 11);
  sim.step(1e-4f);
  ThreadPool pool(2);
  Int8Quantizer serial, parallel({}, &pool);
  Int8State a = serial.quantize(sim.views(), 0);
  Int8State b = parallel.quantize(sim.views(), 0);
  EXPECT_TRUE(testing::same_bytes(a, b));
  EXPECT_EQ(a.state_hash(), b.state_hash());
}

TEST(PulseState, HashesAndFingerprint) {
  auto chain = testing::sim_chain(2, 1e-4f);
  const Int8State& a = chain[0];
  const Int8State& b = chain[1];
  EXPECT_EQ(a.fingerprint(), b.fingerprint());
  EXPECT_NE(a.state_hash(), b.state_hash());
  EXPECT_TRUE(a.verify_cached_hashes());
  Int8State c = a;
  c.set_config_hash(Hash128{1, 2});
  EXPECT_NE(c.fingerprint(), a.fingerprint());
  EXPECT_EQ(c.state_hash(), a.state_hash());  // content only
  // A changed byte changes the tensor hash.
  Int8State d = a;
  StateEditor ed(d);
  ed.tensor("model.norm.weight").bf16[0] ^= 1;
  EXPECT_FALSE(d.verify_cached_hashes());
  ed.rehash("model.norm.weight");
  EXPECT_TRUE(d.verify_cached_hashes());
  EXPECT_NE(d.state_hash(), a.state_hash());
}

}  // namespace
}  // namespace stoa::pulse

namespace stoa::pulse {
namespace {

TEST(PulseQuantizer, FastGroupQuantisationMatchesTheCoreReference) {
  uint64_t s = 12345;
  auto next = [&] {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    return s >> 11;
  };
  std::vector<float> x(32);
  std::vector<int8_t> a(32), b(32);
  for (int trial = 0; trial < 20000; ++trial) {
    uint16_t scale = f32_to_f16(static_cast<float>(next() % 100000 + 1) * 1e-7f);
    float sf = f16_to_f32(scale);
    for (int i = 0; i < 32; ++i) {
      switch (next() % 4) {
        case 0:  // exact ties k + 0.5 and their neighbours
          x[i] = (static_cast<float>(static_cast<int>(next() % 300) - 150) + 0.5f) * sf;
          if (next() % 2) x[i] = std::nextafter(x[i], next() % 2 ? 1.0f : -1.0f);
          break;
        case 1:  // far beyond the grid
          x[i] = static_cast<float>(static_cast<int64_t>(next() % 2000001) - 1000000) * sf;
          break;
        case 2:
          x[i] = 0.0f;
          break;
        default:
          x[i] = (static_cast<float>(next() % 2000000) / 1e6f - 1.0f) * 130.0f * sf;
      }
    }
    int8_quantize_group(x.data(), scale, a.data());
    quantize_group_exact(x.data(), scale, b.data());
    ASSERT_EQ(a, b) << "trial " << trial;
  }
  std::vector<float> zeros(32, 0.0f);
  zeros[3] = 1.0f;
  int8_quantize_group(zeros.data(), 0, a.data());
  quantize_group_exact(zeros.data(), 0, b.data());
  EXPECT_EQ(a, b);
}

}  // namespace
}  // namespace stoa::pulse
