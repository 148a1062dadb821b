// pass@k's unbiased estimator against the closed form and small cases enumerated by hand, and the
// summary that keeps mean reward and pass@k apart.
#include "app/eval/pass_at_k.h"

#include <gtest/gtest.h>

#include <cmath>

#include "core/error.h"

namespace {

using stoa::app::pass_at_k;
using stoa::app::summarize_rewards;

double choose(int n, int k) {
  if (k < 0 || k > n) return 0;
  double r = 1;
  for (int i = 1; i <= k; ++i) r = r * (n - k + i) / i;
  return r;
}

TEST(PassAtK, MatchesTheClosedForm) {
  for (int n = 1; n <= 12; ++n)
    for (int c = 0; c <= n; ++c)
      for (int k = 1; k <= n; ++k)
        EXPECT_NEAR(pass_at_k(n, c, k), 1.0 - choose(n - c, k) / choose(n, k), 1e-12)
            << n << " " << c << " " << k;
}

TEST(PassAtK, SmallCasesByHand) {
  EXPECT_DOUBLE_EQ(pass_at_k(4, 1, 1), 0.25);  // pass@1 is the success rate
  EXPECT_DOUBLE_EQ(pass_at_k(4, 1, 2), 0.5);   // 3 of the 6 pairs hold the success
  EXPECT_DOUBLE_EQ(pass_at_k(4, 0, 4), 0.0);
  EXPECT_DOUBLE_EQ(pass_at_k(4, 1, 4), 1.0);
  EXPECT_DOUBLE_EQ(pass_at_k(4, 3, 2), 1.0);  // one failure cannot fill a pair
}

TEST(PassAtK, RefusesKOutsideTheSamples) {
  EXPECT_THROW(pass_at_k(4, 1, 5), stoa::Error);
  EXPECT_THROW(pass_at_k(4, 1, 0), stoa::Error);
  EXPECT_THROW(pass_at_k(4, 5, 1), stoa::Error);
}

// A task whose rewards are not 0/1: the mean reward counts partial credit, pass@k only rewards
// at or above the success threshold.
TEST(SummarizeRewards, MeanRewardAndPassAtKAreDifferentNumbers) {
  const std::vector<std::vector<double>> rewards = {{0.5, 0.5, 1.0, 0.0}, {0.5, 0.5, 0.5, 0.5}};
  const auto s = summarize_rewards(rewards, {1, 2, 4}, 1.0);
  EXPECT_DOUBLE_EQ(s.mean_reward, 4.0 / 8.0);
  EXPECT_DOUBLE_EQ(s.pass_at.at(1), (0.25 + 0.0) / 2);
  EXPECT_DOUBLE_EQ(s.pass_at.at(2), (0.5 + 0.0) / 2);
  EXPECT_DOUBLE_EQ(s.pass_at.at(4), (1.0 + 0.0) / 2);
  // A lower threshold counts the partial answers as successes.
  EXPECT_DOUBLE_EQ(summarize_rewards(rewards, {1}, 0.5).pass_at.at(1), (0.75 + 1.0) / 2);
  EXPECT_THROW(summarize_rewards({{1.0}, {1.0, 0.0}}, {1}, 1.0), stoa::Error);
  EXPECT_THROW(summarize_rewards({}, {1}, 1.0), stoa::Error);
}

}  // namespace
