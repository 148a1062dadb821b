// The decode state: prefill + incremental decode, batching and forks must all give the logits
// of a full recompute, for every architecture, in f32 and int8.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>

#include "engine/model_runner.h"
#include "engine_test_util.h"
#include "support/param_names.h"

namespace stoa::engine {
namespace {

using testing::kl_logits;
using testing::max_rel_diff;
using testing::random_tokens;
using testing::tiny_model;

struct Case {
  const char* preset;
  WeightFormat format;
};

class RunnerTest : public ::testing::TestWithParam<Case> {};

TEST_P(RunnerTest, IncrementalDecodeEqualsFullRecompute) {
  ModelRunner runner = ModelRunner::from_model(tiny_model(GetParam().preset), GetParam().format);
  const int64_t V = runner.config().vocab_size;
  std::vector<int32_t> tokens = random_tokens(48, V, 1);
  Sequence full_seq = runner.new_sequence(64);
  Tensor full = runner.append(full_seq, tokens, Logits::kAll);
  ASSERT_EQ(full.dim(0), 48);
  for (int64_t prefill : {0, 1, 17}) {
    Tensor inc = runner.score(tokens, prefill);
    EXPECT_LE(max_rel_diff(full, inc), 1e-5) << "prefill " << prefill;
  }
  // Last-token logits of a prefill are the last row of kAll.
  Sequence s = runner.new_sequence(64);
  Tensor last = runner.append(s, tokens, Logits::kLast);
  ASSERT_EQ(last.dim(0), 1);
  for (int64_t v = 0; v < V; ++v) EXPECT_EQ(last.as<float>()[v], full.as<float>()[47 * V + v]);
}

TEST_P(RunnerTest, BatchAndForkMatchSoloRuns) {
  ModelRunner runner = ModelRunner::from_model(tiny_model(GetParam().preset), GetParam().format);
  const int64_t V = runner.config().vocab_size;
  std::vector<int32_t> prompt = random_tokens(20, V, 2);
  std::vector<int32_t> a = random_tokens(7, V, 3);
  std::vector<int32_t> b = random_tokens(3, V, 4);

  // Reference: each continuation recomputed from scratch.
  auto solo = [&](const std::vector<int32_t>& tail) {
    std::vector<int32_t> all = prompt;
    all.insert(all.end(), tail.begin(), tail.end());
    Sequence s = runner.new_sequence(64);
    return runner.append(s, all, Logits::kAll);
  };
  // b's sequence is one token ahead (so the batch mixes positions), then takes 3 tokens.
  std::vector<int32_t> b_full = {11};
  b_full.insert(b_full.end(), b.begin(), b.end());
  Tensor ref_a = solo(a), ref_b = solo(b_full);

  Sequence base = runner.new_sequence(64);
  runner.append(base, prompt, Logits::kNone);
  Sequence fa = base.fork(), fb = base.fork(40);
  EXPECT_EQ(fa.length(), 20);
  EXPECT_EQ(fb.capacity(), 40);
  const int32_t ahead = 11;
  runner.append(fb, std::span<const int32_t>(&ahead, 1), Logits::kNone);
  // a and b advance together in one pass: a as a 7-token "tool observation", b by 3 tokens.
  SequenceInput inputs[] = {{&fa, a, Logits::kAll}, {&fb, b, Logits::kAll}};
  std::vector<Tensor> out = runner.append_batch(inputs);
  ASSERT_EQ(out.size(), 2u);
  for (int64_t i = 0; i < 7; ++i) {
    for (int64_t v = 0; v < V; ++v) {
      EXPECT_NEAR(out[0].as<float>()[i * V + v], ref_a.as<float>()[(20 + i) * V + v], 1e-5);
    }
  }
  for (int64_t i = 0; i < 3; ++i) {
    for (int64_t v = 0; v < V; ++v) {
      EXPECT_NEAR(out[1].as<float>()[i * V + v], ref_b.as<float>()[(21 + i) * V + v], 1e-5);
    }
  }
  EXPECT_EQ(base.length(), 20);  // forks do not share state with their parent
  EXPECT_EQ(fa.length(), 27);
  EXPECT_EQ(fb.tokens().back(), b.back());
  // An empty append changes nothing and returns no rows.
  Tensor none = runner.append(fa, std::span<const int32_t>(), Logits::kAll);
  EXPECT_EQ(none.dim(0), 0);
  EXPECT_EQ(fa.length(), 27);
}

// The in-place view reads the same bits append_batch copies out, row ranges per input follow
// Logits::{kNone,kLast,kAll}, and a rejected pass leaves the previous view intact.
TEST_P(RunnerTest, PassLogitsViewEqualsCopiedLogits) {
  ModelRunner copied = ModelRunner::from_model(tiny_model(GetParam().preset), GetParam().format);
  ModelRunner viewed = ModelRunner::from_model(tiny_model(GetParam().preset), GetParam().format);
  const int64_t V = copied.config().vocab_size;
  const std::vector<int32_t> a = random_tokens(5, V, 5), b = random_tokens(3, V, 6),
                             c = random_tokens(4, V, 7);
  Sequence ca = copied.new_sequence(32), cb = copied.new_sequence(32), cc = copied.new_sequence(32);
  Sequence va = viewed.new_sequence(32), vb = viewed.new_sequence(32), vc = viewed.new_sequence(32);
  SequenceInput copied_inputs[] = {
      {&ca, a, Logits::kAll}, {&cb, b, Logits::kNone}, {&cc, c, Logits::kLast}};
  SequenceInput viewed_inputs[] = {
      {&va, a, Logits::kAll}, {&vb, b, Logits::kNone}, {&vc, c, Logits::kLast}};
  const std::vector<Tensor> out = copied.append_batch(copied_inputs);
  const PassLogits view = viewed.append_batch_view(viewed_inputs);
  ASSERT_EQ(view.size(), 3u);
  EXPECT_EQ(view.vocab(), V);
  EXPECT_EQ(view.count(0), 5);
  EXPECT_EQ(view.count(1), 0);
  EXPECT_EQ(view.count(2), 1);
  for (size_t i = 0; i < 3; ++i) {
    const std::span<const float> rows = view.rows(i);
    ASSERT_EQ(static_cast<int64_t>(rows.size()), out[i].numel());
    EXPECT_EQ(0, std::memcmp(rows.data(), out[i].as<float>(), rows.size_bytes())) << i;
  }
  EXPECT_EQ(0, std::memcmp(view.last(0).data(), out[0].as<float>() + 4 * V,
                           static_cast<size_t>(V) * sizeof(float)));
  EXPECT_THROW(view.last(1), Error);  // asked for no logits

  // A bad token id is rejected before anything runs: the earlier view still reads its pass.
  const std::vector<float> before(view.rows(0).begin(), view.rows(0).end());
  const int32_t bad = static_cast<int32_t>(V);
  SequenceInput rejected[] = {{&va, std::span<const int32_t>(&bad, 1), Logits::kLast}};
  EXPECT_THROW(viewed.append_batch_view(rejected), Error);
  EXPECT_EQ(va.length(), 5);
  EXPECT_EQ(0, std::memcmp(view.rows(0).data(), before.data(), before.size() * sizeof(float)));
}

INSTANTIATE_TEST_SUITE_P(AllArchs, RunnerTest,
                         ::testing::Values(Case{"tiny-qwen3", WeightFormat::kF32},
                                           Case{"tiny-qwen3", WeightFormat::kInt8},
                                           Case{"tiny-lfm2", WeightFormat::kF32},
                                           Case{"tiny-lfm2", WeightFormat::kInt8},
                                           Case{"tiny-lfm2moe", WeightFormat::kF32},
                                           Case{"tiny-lfm2moe", WeightFormat::kInt8}),
                         [](const ::testing::TestParamInfo<Case>& param_info) {
                           return stoa::test::param_name(
                               std::string(param_info.param.preset) + "_" +
                               weight_format_name(param_info.param.format));
                         });

// int8 against f32 on the same weights: the quantization error, as mean per-token KL.
TEST(RunnerTest, Int8CloseToF32) {
  for (const char* preset : {"tiny-qwen3", "tiny-lfm2", "tiny-lfm2moe"}) {
    ModelWeights w = tiny_model(preset);
    ModelRunner f32 = ModelRunner::from_model(w, WeightFormat::kF32);
    ModelRunner q8 = ModelRunner::from_model(w, WeightFormat::kInt8);
    const int64_t V = w.config.vocab_size;
    std::vector<int32_t> tokens = random_tokens(64, V, 9);
    Tensor a = f32.score(tokens, 32), b = q8.score(tokens, 32);
    double kl = 0;
    for (int64_t t = 0; t < 64; ++t)
      kl += kl_logits(a.as<float>() + t * V, b.as<float>() + t * V, V);
    kl /= 64;
    std::printf("[measure] %s int8 vs f32: mean KL %.3g, max rel |dlogit| %.3g\n", preset, kl,
                max_rel_diff(a, b));
    // MoE routing is discontinuous: a near-tie that int8 flips moves the whole FFN output, so
    // the MoE model sits higher than the dense ones (the oracle compares int8 with Q8_0, not f32).
    EXPECT_LT(kl, 1e-2) << preset;
    EXPECT_GT(kl, 0) << preset << ": int8 should not be bit-identical to f32";
  }
}

// A worker receives int8 weights (PULSE): building from that state gives the same engine as
// quantizing locally, and in-place updates take effect on the next pass.
TEST(RunnerTest, Int8StateAndInPlaceUpdates) {
  ModelWeights w = tiny_model("tiny-qwen3");
  EngineWeights local = EngineWeights::from_model(w, WeightFormat::kInt8);
  std::map<std::string, Int8Matrix> int8;
  std::map<std::string, Tensor> f32;
  for (const auto& [name, lin] : local.linears()) {
    if (lin.is_int8()) {
      int8.emplace(name, lin.int8());
    } else {
      f32.emplace(name, lin.f32().clone());
    }
  }
  for (const auto& [name, t] : local.vectors()) f32.emplace(name, t.clone());
  ModelRunner a(std::move(local));
  ModelRunner b(EngineWeights::from_state(w.config, std::move(int8), std::move(f32)));
  std::vector<int32_t> tokens = random_tokens(16, w.config.vocab_size, 3);
  Tensor la = a.score(tokens, 16), lb = b.score(tokens, 16);
  EXPECT_EQ(max_rel_diff(la, lb), 0.0);

  const std::string name = "model.layers.1.mlp.down_proj.weight";
  Int8Matrix original = b.weights().linear(name).int8();
  const std::vector<int8_t> saved = std::move(original.values);
  std::vector<int8_t> flipped(saved.size());
  std::transform(saved.begin(), saved.end(), flipped.begin(),
                 [](int8_t q) { return static_cast<int8_t>(-q); });
  b.host_weights().set_int8_values(name, flipped);
  Tensor changed = b.score(tokens, 16);
  EXPECT_GT(max_rel_diff(la, changed), 1e-3);
  b.host_weights().set_int8_values(name, saved);
  EXPECT_EQ(max_rel_diff(la, b.score(tokens, 16)), 0.0);
  // A whole-matrix update (what an anchor delivers) takes effect the same way, including in the
  // packed copy the VNNI kernel computes from.
  Int8Matrix whole = b.weights().linear(name).int8();
  whole.values = flipped;
  b.host_weights().set_int8(name, std::move(whole));
  EXPECT_EQ(max_rel_diff(changed, b.score(tokens, 16)), 0.0);
}

// The int8 weights are held once, in the layout the backend reads (packed panels for W8A8 where
// the VNNI kernel runs, else the grid): switching backends converts without losing a bit, and
// the embedding lookup reads packed rows.
TEST(RunnerTest, Int8WeightsHeldOnceAcrossBackendSwitches) {
  ModelWeights w = tiny_model("tiny-lfm2moe");
  ModelRunner fresh = ModelRunner::from_model(w, WeightFormat::kInt8);
  ModelRunner switched = ModelRunner::from_model(w, WeightFormat::kInt8);
  std::map<std::string, Int8Matrix> before;
  size_t grid_bytes = 0, held_bytes = 0;
  for (const auto& [name, lin] : fresh.weights().linears()) {
    if (!lin.is_int8()) continue;
    before.emplace(name, lin.int8());
    grid_bytes += lin.int8_grid_nbytes();
    held_bytes += lin.nbytes();
  }
  ASSERT_FALSE(before.empty());
  // One copy: the panels pad rows to 16 and each panel's scales to 64 B, never a second matrix.
  EXPECT_LT(held_bytes, grid_bytes * 13 / 10) << "held " << held_bytes << ", grid " << grid_bytes;

  const std::vector<int32_t> tokens = random_tokens(12, w.config.vocab_size, 9);
  const Tensor want = fresh.score(tokens, 12);
  for (Backend backend : {Backend::kW8A32, Backend::kReference, Backend::kW8A8}) {
    switched.set_backend(backend);
    for (const auto& [name, lin] : switched.weights().linears()) {
      if (!lin.is_int8()) continue;
      const Int8Matrix m = lin.int8();
      EXPECT_EQ(m.values, before.at(name).values) << name << " after " << backend_name(backend);
      EXPECT_EQ(m.scales, before.at(name).scales) << name << " after " << backend_name(backend);
    }
  }
  const Tensor got = switched.score(tokens, 12);  // back on W8A8
  ASSERT_EQ(got.numel(), want.numel());
  EXPECT_EQ(0, std::memcmp(got.as<float>(), want.as<float>(), got.nbytes()));
}

}  // namespace
}  // namespace stoa::engine
