#include "roles/trainer/step_batch.h"

namespace stoa::trainer {

uint64_t group_staleness(const hub::AcceptedGroup& group, uint64_t current) {
  const uint64_t oldest = group.min_version();
  return oldest >= current ? 0 : current - oldest;
}

StalenessSplit apply_staleness(std::vector<hub::AcceptedGroup> groups, uint64_t current,
                               const StalenessPolicy& policy) {
  StalenessSplit out;
  for (auto& g : groups) {
    for (const auto& r : g.rollouts) {
      out.histogram[r.min_version >= current ? 0 : current - r.min_version]++;
    }
    if (group_staleness(g, current) > policy.max_staleness) {
      out.dropped.push_back(g.group_id);
    } else {
      out.kept.push_back(std::move(g));
    }
  }
  return out;
}

train::RolloutGroup to_rollout_group(const hub::AcceptedGroup& group) {
  train::RolloutGroup out;
  out.id = group.group_id;
  out.rollouts.reserve(group.rollouts.size());
  for (const auto& a : group.rollouts) {
    train::Rollout r;
    r.id = a.id;
    r.tokens = a.tokens;
    r.trainable = a.mask;
    r.behaviour_logprobs = a.logprobs;
    r.topk = a.topk;
    r.topk_ids = a.topk_ids;
    r.topk_logprobs = a.topk_logprobs;
    r.reward = a.reward;
    r.policy_version = static_cast<int64_t>(a.min_version);
    out.rollouts.push_back(std::move(r));
  }
  return out;
}

std::vector<train::RolloutGroup> to_rollout_groups(const std::vector<hub::AcceptedGroup>& groups) {
  std::vector<train::RolloutGroup> out;
  out.reserve(groups.size());
  for (const auto& g : groups) out.push_back(to_rollout_group(g));
  return out;
}

bool has_reward_spread(const hub::AcceptedGroup& group) {
  for (const auto& r : group.rollouts)
    if (r.reward != group.rollouts.front().reward) return true;
  return false;
}

double mean_reward(const std::vector<hub::AcceptedGroup>& groups) {
  double sum = 0;
  int64_t n = 0;
  for (const auto& g : groups) {
    for (const auto& r : g.rollouts) {
      sum += r.reward;
      n++;
    }
  }
  return n ? sum / static_cast<double>(n) : 0.0;
}

}  // namespace stoa::trainer
