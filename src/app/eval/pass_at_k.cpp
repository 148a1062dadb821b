#include "app/eval/pass_at_k.h"

#include <cstddef>

#include "core/error.h"

namespace stoa::app {

double pass_at_k(int n, int c, int k) {
  STOA_CHECK(k >= 1 && k <= n, ErrorKind::kInvalidArgument, "pass@", k, " needs 1 <= k <= ", n,
             " samples per question");
  STOA_CHECK(c >= 0 && c <= n, ErrorKind::kInvalidArgument, "pass@k: ", c, " successes of ", n);
  // Fewer failures than k: every draw of k holds a success.
  if (n - c < k) return 1.0;
  // C(n-c, k) / C(n, k) = prod_{i=n-c+1}^{n} (1 - k/i).
  double none = 1.0;
  for (int i = n - c + 1; i <= n; ++i) none *= 1.0 - static_cast<double>(k) / i;
  return 1.0 - none;
}

RewardSummary summarize_rewards(const std::vector<std::vector<double>>& rewards,
                                const std::vector<int>& ks, double success_reward) {
  STOA_CHECK(!rewards.empty(), ErrorKind::kInvalidArgument, "eval: no questions to summarize");
  const size_t n = rewards.front().size();
  STOA_CHECK(n > 0, ErrorKind::kInvalidArgument, "eval: no samples per question");
  RewardSummary s;
  double total = 0;
  std::vector<int> successes;
  successes.reserve(rewards.size());
  for (const std::vector<double>& q : rewards) {
    STOA_CHECK(q.size() == n, ErrorKind::kInvalidArgument, "eval: ", q.size(),
               " samples for a question, ", n, " for another");
    int c = 0;
    for (double r : q) {
      total += r;
      c += r >= success_reward ? 1 : 0;
    }
    successes.push_back(c);
  }
  s.mean_reward = total / static_cast<double>(rewards.size() * n);
  for (int k : ks) {
    double sum = 0;
    for (int c : successes) sum += pass_at_k(static_cast<int>(n), c, k);
    s.pass_at[k] = sum / static_cast<double>(rewards.size());
  }
  return s;
}

}  // namespace stoa::app
