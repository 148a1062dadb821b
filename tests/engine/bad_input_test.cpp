// Bad input gets a clear stoa::Error and leaves state untouched: token ids outside the
// vocabulary, sequences over capacity, mismatched or repeated sequences, malformed int8 state,
// bad sampling settings.
#include <gtest/gtest.h>

#include <cmath>

#include "core/error.h"
#include "engine/model_runner.h"
#include "engine/sampler.h"
#include "engine_test_util.h"
#include "support/error_of.h"

namespace stoa::engine {
namespace {

TEST(EngineBadInput, TokenOutsideVocabulary) {
  ModelRunner runner =
      ModelRunner::from_model(testing::tiny_model("tiny-qwen3"), WeightFormat::kF32);
  Sequence seq = runner.new_sequence(8);
  std::vector<int32_t> tokens = {1, 2, 512};
  std::string msg = stoa::test::message_of([&] { runner.append(seq, tokens); });
  EXPECT_NE(msg.find("token 2 has id 512, outside the vocabulary [0, 512)"), std::string::npos)
      << msg;
  tokens = {-1};
  EXPECT_NE(stoa::test::message_of([&] { runner.append(seq, tokens); }).find("id -1"),
            std::string::npos);
  EXPECT_EQ(seq.length(), 0);
}

TEST(EngineBadInput, SequenceOverCapacity) {
  ModelRunner runner =
      ModelRunner::from_model(testing::tiny_model("tiny-lfm2"), WeightFormat::kInt8);
  Sequence seq = runner.new_sequence(4);
  std::vector<int32_t> three = {1, 2, 3};
  runner.append(seq, three);
  std::vector<float> conv_before = seq.layer(0).conv;
  std::string msg = stoa::test::message_of([&] { runner.append(seq, three); });
  EXPECT_NE(msg.find("sequence of 3 tokens with capacity 4 cannot take 3 more"), std::string::npos)
      << msg;
  EXPECT_EQ(seq.length(), 3);
  EXPECT_EQ(seq.layer(0).conv, conv_before);  // nothing was written
  std::vector<int32_t> one = {4};
  runner.append(seq, one);  // exactly full is fine
  EXPECT_EQ(seq.remaining(), 0);
  EXPECT_NE(stoa::test::message_of([&] { (void)seq.fork(2); }).find("cannot fork"),
            std::string::npos);
  EXPECT_NE(stoa::test::message_of([&] {
              (void)runner.new_sequence(0);
            }).find("capacity must be positive"),
            std::string::npos);
}

TEST(EngineBadInput, BatchMisuse) {
  ModelRunner qwen = ModelRunner::from_model(testing::tiny_model("tiny-qwen3"), WeightFormat::kF32);
  ModelRunner lfm = ModelRunner::from_model(testing::tiny_model("tiny-lfm2"), WeightFormat::kF32);
  Sequence s = qwen.new_sequence(8);
  std::vector<int32_t> t = {1};
  SequenceInput twice[] = {{&s, t, Logits::kLast}, {&s, t, Logits::kLast}};
  EXPECT_NE(stoa::test::message_of([&] { qwen.append_batch(twice); }).find("repeats a sequence"),
            std::string::npos);
  EXPECT_NE(stoa::test::message_of([&] { lfm.append(s, t); }).find("different model"),
            std::string::npos);
  SequenceInput null_seq[] = {{nullptr, t, Logits::kLast}};
  EXPECT_NE(stoa::test::message_of([&] { qwen.append_batch(null_seq); }).find("no sequence"),
            std::string::npos);
  EXPECT_EQ(s.length(), 0);
}

TEST(EngineBadInput, MalformedInt8State) {
  ModelWeights w = testing::tiny_model("tiny-lfm2moe");
  auto state = [&](bool quantize_router) {
    std::map<std::string, Int8Matrix> q;
    std::map<std::string, Tensor> f;
    for (const auto& [name, t] : w.tensors) {
      bool as_int8 =
          int8_eligible(name, t.shape()) ||
          (quantize_router && name.find("feed_forward.gate.weight") != std::string::npos);
      if (as_int8) {
        q.emplace(name, int8_quantize(t.as<float>(), t.dim(0), t.dim(1)));
      } else {
        f.emplace(name, t.clone());
      }
    }
    return std::make_pair(std::move(q), std::move(f));
  };
  {
    auto [q, f] = state(false);
    EXPECT_NO_THROW(EngineWeights::from_state(w.config, std::move(q), std::move(f)));
  }
  {
    // A router delivered on the int8 grid is dequantized: the engine routes in f32.
    auto [q, f] = state(true);
    const std::string router = "model.layers.1.feed_forward.gate.weight";
    std::vector<float> expected(static_cast<size_t>(q.at(router).rows * q.at(router).cols));
    int8_dequantize(q.at(router), expected.data());
    EngineWeights e = EngineWeights::from_state(w.config, std::move(q), std::move(f));
    ASSERT_FALSE(e.linear(router).is_int8());
    EXPECT_EQ(std::vector<float>(e.linear(router).f32().as<float>(),
                                 e.linear(router).f32().as<float>() + expected.size()),
              expected);
  }
  {
    // A norm cannot be int8.
    auto [q, f] = state(false);
    const std::string norm = "model.layers.0.operator_norm.weight";
    q.emplace(norm, int8_quantize(f.at(norm).as<float>(), 1, 64));
    f.erase(norm);
    EXPECT_NE(stoa::test::message_of([&] {
                EngineWeights::from_state(w.config, std::move(q), std::move(f));
              }).find("operator_norm.weight [64] cannot be int8"),
              std::string::npos);
  }
  {
    // Norms may come as bf16 (PULSE's carrier for non-grid tensors).
    auto [q, f] = state(false);
    const std::string norm = "model.layers.0.operator_norm.weight";
    f[norm] = convert_float(f.at(norm).view(), DType::kBF16);
    EXPECT_NO_THROW(EngineWeights::from_state(w.config, std::move(q), std::move(f)));
  }
  {
    auto [q, f] = state(false);
    q.erase("model.layers.0.conv.in_proj.weight");
    EXPECT_NE(stoa::test::message_of([&] {
                EngineWeights::from_state(w.config, std::move(q), std::move(f));
              }).find("lacks tensor model.layers.0.conv.in_proj.weight"),
              std::string::npos);
  }
  {
    auto [q, f] = state(false);
    q["model.layers.0.conv.in_proj.weight"].rows = 7;
    EXPECT_NE(stoa::test::message_of([&] {
                EngineWeights::from_state(w.config, std::move(q), std::move(f));
              }).find("the config implies [192, 64]"),
              std::string::npos);
  }
  {
    auto [q, f] = state(false);
    f.emplace("model.layers.0.extra.weight", Tensor(DType::kF32, {4}));
    EXPECT_NE(stoa::test::message_of([&] {
                EngineWeights::from_state(w.config, std::move(q), std::move(f));
              }).find("does not use"),
              std::string::npos);
  }
  // Updates with the wrong size are refused.
  ModelRunner runner = ModelRunner::from_model(w, WeightFormat::kInt8);
  std::vector<int8_t> short_values(10);
  EXPECT_NE(stoa::test::message_of([&] {
              runner.host_weights().set_int8_values("model.layers.0.conv.in_proj.weight",
                                                    short_values);
            }).find("has 10 values"),
            std::string::npos);
  EXPECT_NE(stoa::test::message_of([&] {
              runner.host_weights().set_int8_values("model.layers.0.nope", short_values);
            }).find("lack int8 tensor model.layers.0.nope"),
            std::string::npos);
}

TEST(EngineBadInput, SamplingSettings) {
  SamplingParams p;
  p.top_p = 0;
  EXPECT_NE(stoa::test::message_of([&] { Sampler s(p, 1); }).find("top_p"), std::string::npos);
  p = {};
  p.temperature = -1;
  EXPECT_NE(stoa::test::message_of([&] { Sampler s(p, 1); }).find("temperature"),
            std::string::npos);
  p = {};
  p.top_k = -3;
  EXPECT_NE(stoa::test::message_of([&] { Sampler s(p, 1); }).find("top_k"), std::string::npos);
  Sampler ok({}, 1);
  std::vector<float> nan_logits = {0, NAN};
  EXPECT_NE(stoa::test::message_of([&] { ok.sample(nan_logits); }).find("logit 1 is nan"),
            std::string::npos);
  std::vector<float> empty;
  EXPECT_NE(stoa::test::message_of([&] { ok.sample(empty); }).find("empty"), std::string::npos);
  std::vector<float> masked = {-INFINITY, -INFINITY};
  EXPECT_NE(stoa::test::message_of([&] { ok.sample(masked); }).find("every logit is -inf"),
            std::string::npos);
}

}  // namespace
}  // namespace stoa::engine
