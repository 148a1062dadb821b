// What goes into one trainer step: the staleness policy over complete groups from the ledger, and
// the conversion of the hub's accepted rollouts into the trainer's RolloutGroups. Torch-free
// (plain data in and out) so it is unit-tested without a model.
//
// Staleness is measured on the OLDEST model-generated token of a group (AcceptedGroup::
// min_version): a rollout that switched weights mid-generation (in-flight update) is as stale as
// its first token. A group is kept whole or dropped whole — its advantages are relative within the
// group, so training on a subset would bias them.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "roles/hub/trainer_port.h"
#include "train/rollout.h"

namespace stoa::trainer {

struct StalenessPolicy {
  uint64_t max_staleness =
      4;  // versions between the trainer's current version and the oldest token
};

struct StalenessSplit {
  std::vector<hub::AcceptedGroup> kept;
  std::vector<std::string> dropped;  // group ids
  // staleness (current − min_version, per rollout) → rollouts, over kept and dropped groups.
  std::map<uint64_t, int64_t> histogram;
};

// Staleness of a group at `current`; a group newer than `current` (cannot happen with a sane hub,
// but the ledger is external input) counts as 0.
uint64_t group_staleness(const hub::AcceptedGroup& group, uint64_t current);

// Splits groups into those trained now and those dropped for staleness, preserving order.
StalenessSplit apply_staleness(std::vector<hub::AcceptedGroup> groups, uint64_t current,
                               const StalenessPolicy& policy);

// The trainer's view of a group: mask → trainable, logprobs → behaviour log-probs, the hub's
// (recomputed) reward, policy_version = the rollout's oldest token version.
train::RolloutGroup to_rollout_group(const hub::AcceptedGroup& group);
std::vector<train::RolloutGroup> to_rollout_groups(const std::vector<hub::AcceptedGroup>& groups);

// Whether the group's rollouts earned different rewards. A group where they all earned the same
// has advantage exactly 0 for every rollout under every advantage kind (r − mean = 0), so its
// policy-gradient term is zero: training on it costs forward and backward passes and nothing else.
bool has_reward_spread(const hub::AcceptedGroup& group);

// Mean reward over every rollout of the groups (0 for none).
double mean_reward(const std::vector<hub::AcceptedGroup>& groups);

}  // namespace stoa::trainer
