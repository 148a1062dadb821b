// Generation: the reported log-probs are those of the sampling distribution at each step,
// recomputed independently from a full forward over the final sequence.
#include <gtest/gtest.h>

#include <cmath>

#include "engine/generate.h"
#include "engine_test_util.h"

namespace stoa::engine {
namespace {

TEST(Generate, LogprobsMatchRecomputedDistribution) {
  ModelRunner runner =
      ModelRunner::from_model(testing::tiny_model("tiny-lfm2moe"), WeightFormat::kInt8);
  const int64_t V = runner.config().vocab_size;
  std::vector<int32_t> prompt = testing::random_tokens(9, V, 11);
  GenerateOptions g;
  g.max_tokens = 12;
  g.sampling.temperature = 0.9;
  g.sampling.top_p = 0.95;
  g.sampling.top_k = 50;
  g.sampling.top_logprobs = 3;
  g.seed = 77;
  Sequence seq = runner.new_sequence(21);
  int streamed = 0;
  GenerationResult r = generate(runner, seq, prompt, g, [&](const SampledToken&) { ++streamed; });
  ASSERT_EQ(r.tokens.size(), 12u);
  EXPECT_EQ(streamed, 12);
  EXPECT_FALSE(r.stopped);
  // The sequence holds the prompt and every generated token, the last one included.
  ASSERT_EQ(seq.length(), 21);
  std::vector<int32_t> all = seq.tokens();
  Tensor logits = runner.score(all, static_cast<int64_t>(all.size()));
  for (size_t i = 0; i < r.tokens.size(); ++i) {
    const float* row = logits.as<float>() + (prompt.size() - 1 + i) * V;
    std::vector<TokenLogprob> dist =
        sampling_distribution(std::span<const float>(row, static_cast<size_t>(V)), g.sampling);
    bool found = false;
    for (const TokenLogprob& t : dist) {
      if (t.token == r.tokens[i]) {
        EXPECT_NEAR(t.logprob, r.logprobs[i], 1e-5) << "step " << i;
        found = true;
      }
    }
    EXPECT_TRUE(found) << "step " << i << ": token outside the truncated support";
    ASSERT_EQ(r.top[i].size(), 3u);
    EXPECT_GE(r.top[i][0].logprob, r.logprobs[i]);
  }
  // Same seed, same tokens; another seed, other tokens.
  Sequence again = runner.new_sequence(21);
  EXPECT_EQ(generate(runner, again, prompt, g).tokens, r.tokens);
  g.seed = 78;
  Sequence other = runner.new_sequence(21);
  EXPECT_NE(generate(runner, other, prompt, g).tokens, r.tokens);
}

TEST(Generate, StopsOnStopTokenAndChecksBudget) {
  ModelRunner runner =
      ModelRunner::from_model(testing::tiny_model("tiny-qwen3"), WeightFormat::kF32);
  std::vector<int32_t> prompt = {5, 6, 7};
  GenerateOptions g;
  g.sampling.temperature = 0;
  g.max_tokens = 4;
  Sequence probe = runner.new_sequence(8);
  int32_t first = generate(runner, probe, prompt, g).tokens.at(0);
  g.stop_tokens = {first};
  Sequence seq = runner.new_sequence(8);
  GenerationResult r = generate(runner, seq, prompt, g);
  EXPECT_TRUE(r.stopped);
  EXPECT_EQ(r.tokens, std::vector<int32_t>{first});
  EXPECT_EQ(r.logprobs, std::vector<float>{0.0f});
  EXPECT_EQ(seq.length(), 4);
  Sequence small = runner.new_sequence(5);
  EXPECT_THROW(generate(runner, small, prompt, g), Error);
  EXPECT_EQ(small.length(), 0);
}

}  // namespace
}  // namespace stoa::engine
