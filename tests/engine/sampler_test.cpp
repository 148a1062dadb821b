// The sampler: exact truncation on hand-built logits, log-probs under the truncated
// distribution, empirical frequencies, determinism.
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "engine/sampler.h"

namespace stoa::engine {
namespace {

std::map<int32_t, double> as_probs(const std::vector<TokenLogprob>& dist) {
  std::map<int32_t, double> out;
  for (const TokenLogprob& t : dist) out[t.token] = std::exp(static_cast<double>(t.logprob));
  return out;
}

// Probabilities 0.5, 0.25, 0.125, 0.0625, 0.0625 for ids 3, 0, 4, 1, 2.
const std::vector<float> kLogits = {std::log(0.25f), std::log(0.0625f), std::log(0.0625f),
                                    std::log(0.5f), std::log(0.125f)};

TEST(Sampler, FullDistributionAtTemperatureOne) {
  auto p = as_probs(sampling_distribution(kLogits, {}));
  ASSERT_EQ(p.size(), 5u);
  EXPECT_NEAR(p[3], 0.5, 1e-6);
  EXPECT_NEAR(p[1], 0.0625, 1e-6);
}

TEST(Sampler, TopKExact) {
  SamplingParams params;
  params.top_k = 2;
  auto p = as_probs(sampling_distribution(kLogits, params));
  ASSERT_EQ(p.size(), 2u);
  EXPECT_NEAR(p[3], 0.5 / 0.75, 1e-6);
  EXPECT_NEAR(p[0], 0.25 / 0.75, 1e-6);
  // Ties at the cut go to the lower id: ids 1 and 2 tie at 0.0625.
  params.top_k = 4;
  p = as_probs(sampling_distribution(kLogits, params));
  EXPECT_TRUE(p.count(1));
  EXPECT_FALSE(p.count(2));
}

TEST(Sampler, TopPExact) {
  SamplingParams params;
  params.top_p = 0.75;  // 0.5 + 0.25 reaches 0.75 exactly: two tokens
  auto p = as_probs(sampling_distribution(kLogits, params));
  ASSERT_EQ(p.size(), 2u);
  params.top_p = 0.76;  // needs the third
  p = as_probs(sampling_distribution(kLogits, params));
  ASSERT_EQ(p.size(), 3u);
  EXPECT_NEAR(p[4], 0.125 / 0.875, 1e-6);
  params.top_p = 0.1;  // the most likely token alone
  p = as_probs(sampling_distribution(kLogits, params));
  ASSERT_EQ(p.size(), 1u);
  EXPECT_NEAR(p[3], 1.0, 1e-7);
}

TEST(Sampler, TemperatureThenTopKThenTopP) {
  // T = 0.5 squares the probabilities: 0.25, 0.0625, 0.015625, 0.0039, 0.0039 (unnormalised).
  SamplingParams params;
  params.temperature = 0.5;
  params.top_k = 3;
  params.top_p = 0.9;
  auto p = as_probs(sampling_distribution(kLogits, params));
  // Top-3 masses 0.25, 0.0625, 0.015625 -> 0.7619, 0.1905, 0.0476; 0.7619 + 0.1905 >= 0.9.
  ASSERT_EQ(p.size(), 2u);
  EXPECT_NEAR(p[3], 0.25 / 0.3125, 1e-6);
  EXPECT_NEAR(p[0], 0.0625 / 0.3125, 1e-6);
}

TEST(Sampler, GreedyIsPointMass) {
  SamplingParams params;
  params.temperature = 0;
  params.top_logprobs = 3;
  Sampler s(params, 1);
  SampledToken t = s.sample(kLogits);
  EXPECT_EQ(t.token, 3);
  EXPECT_EQ(t.logprob, 0.0f);
  ASSERT_EQ(t.top.size(), 1u);
  EXPECT_EQ(t.top[0].token, 3);
}

TEST(Sampler, LogprobIsUnderTheSampledDistribution) {
  SamplingParams params;
  params.temperature = 0.7;
  params.top_p = 0.8;
  params.top_logprobs = 10;
  std::vector<TokenLogprob> dist = sampling_distribution(kLogits, params);
  double total = 0;
  for (const TokenLogprob& t : dist) total += std::exp(static_cast<double>(t.logprob));
  EXPECT_NEAR(total, 1.0, 1e-6);
  auto p = as_probs(dist);
  Sampler s(params, 42);
  for (int i = 0; i < 50; ++i) {
    SampledToken t = s.sample(kLogits);
    ASSERT_TRUE(p.count(t.token)) << "sampled a token outside the truncated support";
    EXPECT_NEAR(std::exp(t.logprob), p[t.token], 1e-6);
    ASSERT_EQ(t.top.size(), dist.size());  // top_logprobs larger than the support
    for (size_t j = 1; j < t.top.size(); ++j) EXPECT_GE(t.top[j - 1].logprob, t.top[j].logprob);
  }
}

TEST(Sampler, FrequenciesMatchDistribution) {
  SamplingParams params;
  params.temperature = 1.3;
  params.top_k = 4;
  auto p = as_probs(sampling_distribution(kLogits, params));
  Sampler s(params, 2026);
  const int n = 40000;
  std::map<int32_t, int> counts;
  for (int i = 0; i < n; ++i) counts[s.sample(kLogits).token]++;
  // Pearson chi-square, 3 degrees of freedom: P(chi2 > 16.27) = 0.001.
  double chi2 = 0;
  for (const auto& [id, prob] : p) {
    double expected = n * prob;
    chi2 += (counts[id] - expected) * (counts[id] - expected) / expected;
  }
  EXPECT_LT(chi2, 16.27);
  EXPECT_EQ(counts.count(2), 0u);  // truncated away
}

TEST(Sampler, SeededAndDeterministic) {
  SamplingParams params;
  Sampler a(params, 5), b(params, 5), c(params, 6), d(params, 5, 1);
  std::vector<int32_t> sa, sb, sc, sd;
  for (int i = 0; i < 64; ++i) {
    sa.push_back(a.sample(kLogits).token);
    sb.push_back(b.sample(kLogits).token);
    sc.push_back(c.sample(kLogits).token);
    sd.push_back(d.sample(kLogits).token);
  }
  EXPECT_EQ(sa, sb);
  EXPECT_NE(sa, sc);
  EXPECT_NE(sa, sd);  // another stream under the same seed
  // The generator itself is pinned: the same numbers on every machine.
  Rng rng(1, kSamplerStreamBase);
  EXPECT_EQ(rng.next(), Rng(1, kSamplerStreamBase).next());
}

// Positional draws (the worker's replayable rollouts): a token's draw depends on (seed, position)
// alone — not on how many tokens were drawn before or in which order — and is the documented
// function of positional_uniform and pick_index; across positions it follows the distribution.
TEST(Sampler, PositionalDrawIsAPureFunctionOfSeedAndPosition) {
  SamplingParams params;
  params.temperature = 1.3;
  params.top_k = 4;
  const auto dist = sampling_distribution(kLogits, params);
  Sampler forward(params, 9, 0, DrawMode::kPositional);
  Sampler backward(params, 9, 7, DrawMode::kPositional);  // the stream does not matter
  std::vector<int32_t> fwd(64), bwd(64);
  for (uint64_t p = 0; p < 64; ++p) fwd[p] = forward.sample(kLogits, p).token;
  for (uint64_t p = 64; p-- > 0;) bwd[p] = backward.sample(kLogits, p).token;
  EXPECT_EQ(fwd, bwd);
  for (uint64_t p = 0; p < 64; ++p)
    EXPECT_EQ(fwd[p], dist[pick_index(dist, positional_uniform(9, p))].token);
  EXPECT_EQ(positional_uniform(9, 3), Rng(9, kSamplerPositionBase + 3).uniform());
  Sampler other_seed(params, 10, 0, DrawMode::kPositional);
  std::vector<int32_t> o(64);
  for (uint64_t p = 0; p < 64; ++p) o[p] = other_seed.sample(kLogits, p).token;
  EXPECT_NE(fwd, o);
  const int n = 40000;
  std::map<int32_t, int> counts;
  for (uint64_t p = 0; p < n; ++p) counts[forward.sample(kLogits, p).token]++;
  double chi2 = 0;  // 3 degrees of freedom: P(chi2 > 16.27) = 0.001
  for (const auto& [id, prob] : as_probs(dist)) {
    const double expected = n * prob;
    chi2 += (counts[id] - expected) * (counts[id] - expected) / expected;
  }
  EXPECT_LT(chi2, 16.27);
}

// The sampler's streams are the ones it drew before it shared Rng: seed ^ (stream * K + C) fed to
// splitmix64 (first outputs pinned from an independent Python transcription), so a seed's
// rollouts are unchanged.
TEST(Sampler, StreamsAreTheOnesItAlwaysDrew) {
  Rng first(1, kSamplerStreamBase + 0);
  EXPECT_EQ(first.next(), 0xffe386a6e6cedb2dull);
  EXPECT_EQ(first.next(), 0x9f7656f12b087febull);
  Rng other(5, kSamplerStreamBase + 3);
  EXPECT_EQ(other.next(), 0x5d5242a6c4fa3787ull);
  EXPECT_EQ(other.next(), 0xfa921ebfc4caadbaull);
  // And the sampler draws one uniform per token from exactly that stream: token i is picked when
  // the draw falls in [sum of p(j < i), sum of p(j <= i)).
  const std::vector<float> logits = {0.0f, 1.0f, 2.0f, 0.5f};
  const std::vector<TokenLogprob> dist = sampling_distribution(logits, {});
  Sampler sampler({}, 5, 3);
  Rng same(5, kSamplerStreamBase + 3);
  for (int i = 0; i < 64; ++i) {
    const double u = same.uniform();
    size_t pick = dist.size() - 1;
    double cum = 0;
    for (size_t j = 0; j < dist.size(); ++j) {
      cum += std::exp(static_cast<double>(dist[j].logprob));
      if (u < cum) {
        pick = j;
        break;
      }
    }
    EXPECT_EQ(sampler.sample(logits).token, dist[pick].token) << i;
  }
}

TEST(Sampler, MaskedTokensAreOutsideTheSupport) {
  std::vector<float> logits = {0, -INFINITY, 0};
  auto p = as_probs(sampling_distribution(logits, {}));
  EXPECT_EQ(p.size(), 2u);
  EXPECT_NEAR(p[0], 0.5, 1e-7);
}

}  // namespace
}  // namespace stoa::engine
