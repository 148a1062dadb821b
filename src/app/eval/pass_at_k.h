// pass@k from n samples per question, and the task-neutral summary of an evaluation's rewards.
// A reward is a task's number, not necessarily 0/1: "mean reward" averages it, while pass@k counts
// a sample as a success when its reward reaches a threshold (1.0 by default: an exact-match task's
// correct answer), so the two never share a name.
#pragma once
#include <map>
#include <vector>

namespace stoa::app {

// The unbiased estimator of pass@k (Chen et al. 2021, "Evaluating Large Language Models Trained on
// Code"): the probability that at least one of k samples drawn without replacement from the n taken
// is a success, given c successes: 1 - C(n-c, k) / C(n, k), computed as a product (no overflow).
// kInvalidArgument unless 1 <= k <= n and 0 <= c <= n.
double pass_at_k(int n, int c, int k);

struct RewardSummary {
  double mean_reward = 0;         // over every sample of every question
  std::map<int, double> pass_at;  // k -> the estimator averaged over the questions
};

// rewards[q] holds question q's n samples (the same n for every question). kInvalidArgument for
// no questions, a ragged or empty sample list, or a k outside 1..n.
RewardSummary summarize_rewards(const std::vector<std::vector<double>>& rewards,
                                const std::vector<int>& ks, double success_reward);

}  // namespace stoa::app
