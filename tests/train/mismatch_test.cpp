// The torch-free mismatch measure (`stoa experiment mismatch`) against the trainer's own
// definitions: per-token binary TV/KL equal losses.cpp's, and the "would be masked" fractions equal
// the fraction of tokens policy_loss drops when every token has a positive (negative) advantage.
#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "core/error.h"
#include "train/losses.h"
#include "train/mismatch.h"

namespace stoa::train {
namespace {

torch::Tensor vec(const std::vector<double>& v) {
  return torch::tensor(v, torch::TensorOptions().dtype(torch::kFloat64));
}

double masked_fraction(const LossConfig& config, const std::vector<double>& logp,
                       const std::vector<double>& mu_logp, double advantage) {
  LossInputs in;
  in.logp = vec(logp).requires_grad_(true);
  in.mu_logp = vec(mu_logp);
  in.advantage = torch::full({static_cast<int64_t>(logp.size())}, advantage, torch::kFloat64);
  in.weight = torch::full({static_cast<int64_t>(logp.size())}, 1.0, torch::kFloat64);
  LossTerms t = policy_loss(config, in);
  return 1.0 - t.keep.mean().item<double>();
}

TEST(Mismatch, MatchesTheTrainersDivergencesAndMasks) {
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> u(0.001, 0.999), jitter(-0.3, 0.3);
  std::vector<double> logp, mu_logp;
  for (int i = 0; i < 2000; ++i) {
    const double mu = u(rng);
    const double p = std::clamp(mu + jitter(rng) * (i % 3 == 0 ? 1.0 : 0.1), 1e-4, 0.9999);
    logp.push_back(std::log(p));
    mu_logp.push_back(std::log(mu));
  }
  LossConfig tv, kl;
  tv.kind = LossKind::kDppoBinaryTv;
  kl.kind = LossKind::kDppoBinaryKl;
  kl.delta_hi = kl.delta_lo = 0.05;
  MismatchAccumulator acc(tv, kl);
  for (size_t i = 0; i < logp.size(); ++i) acc.add(logp[i], mu_logp[i]);
  const MismatchStats s = acc.finish();
  ASSERT_EQ(s.tokens, 2000);

  const torch::Tensor t_tv = binary_tv(vec(logp), vec(mu_logp));
  const torch::Tensor t_kl = binary_kl(vec(logp), vec(mu_logp), kl.kl_eps);
  EXPECT_NEAR(s.tv_mean, t_tv.mean().item<double>(), 1e-12);
  EXPECT_NEAR(s.kl_mean, t_kl.mean().item<double>(), 1e-12);
  EXPECT_NEAR(s.tv_max, t_tv.max().item<double>(), 1e-12);
  EXPECT_NEAR(s.kl_max, t_kl.max().item<double>(), 1e-12);
  EXPECT_LE(s.tv_p99, s.tv_max);
  EXPECT_GT(s.tv_p99, s.tv_mean);

  EXPECT_DOUBLE_EQ(s.masked_tv_if_positive, masked_fraction(tv, logp, mu_logp, +1.0));
  EXPECT_DOUBLE_EQ(s.masked_tv_if_negative, masked_fraction(tv, logp, mu_logp, -1.0));
  EXPECT_DOUBLE_EQ(s.masked_kl_if_positive, masked_fraction(kl, logp, mu_logp, +1.0));
  EXPECT_DOUBLE_EQ(s.masked_kl_if_negative, masked_fraction(kl, logp, mu_logp, -1.0));
  // The data has large drifts on a third of the tokens: both rules mask something on each side.
  EXPECT_GT(s.masked_tv_if_positive, 0.0);
  EXPECT_GT(s.masked_kl_if_negative, 0.0);
}

TEST(Mismatch, IdenticalPoliciesHaveNoMismatch) {
  MismatchAccumulator acc(LossConfig{}, LossConfig{});
  for (double lp : {-0.1, -1.0, -3.0}) acc.add(lp, lp);
  const MismatchStats s = acc.finish();
  EXPECT_EQ(s.tokens, 3);
  EXPECT_EQ(s.tv_max, 0.0);
  EXPECT_NEAR(s.kl_max, 0.0, 1e-9);
  EXPECT_EQ(s.masked_tv_if_positive + s.masked_tv_if_negative, 0.0);
}

TEST(Mismatch, RefusesImpossibleLogProbabilities) {
  MismatchAccumulator acc(LossConfig{}, LossConfig{});
  EXPECT_THROW(acc.add(0.5, -1.0), Error);
  EXPECT_THROW(acc.add(-1.0, std::nan("")), Error);
  EXPECT_THROW(acc.add(-INFINITY, -1.0), Error);
  EXPECT_EQ(acc.finish().tokens, 0);  // nothing was counted
}

}  // namespace
}  // namespace stoa::train
