// The staleness policy and group assembly: what the trainer loop trains on and what it drops.
#include <gtest/gtest.h>

#include "roles/trainer/step_batch.h"

namespace stoa::trainer {
namespace {

hub::AcceptedRollout rollout(const std::string& id, uint64_t vmin, uint64_t vmax, double reward) {
  hub::AcceptedRollout r;
  r.id = id;
  r.tokens = {1, 2, 3, 4};
  r.mask = {0, 0, 1, 1};
  r.logprobs = {0.f, 0.f, -0.5f, -1.5f};
  r.versions = {0, 0, vmin, vmax};
  r.reward = reward;
  r.min_version = vmin;
  r.max_version = vmax;
  return r;
}

hub::AcceptedGroup group(const std::string& id, std::vector<hub::AcceptedRollout> rs) {
  hub::AcceptedGroup g;
  g.group_id = id;
  g.prompt_id = "p-" + id;
  g.rollouts = std::move(rs);
  return g;
}

TEST(Staleness, BoundIsOnTheOldestTokenOfTheWholeGroup) {
  // current version 10, bound 3: a group is kept iff every rollout's oldest token is >= 7.
  std::vector<hub::AcceptedGroup> gs = {
      group("fresh", {rollout("a", 10, 10, 1), rollout("b", 9, 10, 0)}),
      group("edge", {rollout("c", 7, 10, 1), rollout("d", 8, 8, 0)}),
      // max_version is fresh but the first token came from version 6: stale.
      group("mixed", {rollout("e", 6, 10, 1), rollout("f", 10, 10, 0)}),
      group("old", {rollout("g", 2, 3, 1), rollout("h", 1, 1, 0)}),
  };
  auto split = apply_staleness(gs, 10, StalenessPolicy{3});
  ASSERT_EQ(split.kept.size(), 2u);
  EXPECT_EQ(split.kept[0].group_id, "fresh");
  EXPECT_EQ(split.kept[1].group_id, "edge");
  EXPECT_EQ(split.dropped, (std::vector<std::string>{"mixed", "old"}));
  // Per-rollout histogram of current − oldest token, over kept and dropped alike.
  std::map<uint64_t, int64_t> want = {{0, 2}, {1, 1}, {2, 1}, {3, 1}, {4, 1}, {8, 1}, {9, 1}};
  EXPECT_EQ(split.histogram, want);
}

TEST(Staleness, ZeroBoundIsStrictlyOnPolicyAndFutureVersionsCountAsFresh) {
  std::vector<hub::AcceptedGroup> gs = {group("now", {rollout("a", 5, 5, 1)}),
                                        group("prev", {rollout("b", 4, 5, 1)}),
                                        group("ahead", {rollout("c", 6, 6, 1)})};
  auto split = apply_staleness(gs, 5, StalenessPolicy{0});
  ASSERT_EQ(split.kept.size(), 2u);
  EXPECT_EQ(split.kept[0].group_id, "now");
  EXPECT_EQ(split.kept[1].group_id, "ahead");
  EXPECT_EQ(split.dropped, std::vector<std::string>{"prev"});
  EXPECT_EQ(group_staleness(gs[2], 5), 0u);
  EXPECT_EQ(group_staleness(gs[1], 5), 1u);
}

TEST(GroupAssembly, CarriesEveryFieldTheLossReads) {
  auto r = rollout("r1", 3, 4, 0.75);
  r.topk = 2;
  r.topk_ids = {1, 0, 2, 0, 3, 1, 4, 2};
  r.topk_logprobs = {-0.1f, -2.f, -0.2f, -3.f, -0.5f, -1.f, -1.5f, -0.4f};
  auto g = group("g1", {r, rollout("r2", 4, 4, 0.25)});
  auto tg = to_rollout_group(g);
  EXPECT_EQ(tg.id, "g1");
  ASSERT_EQ(tg.rollouts.size(), 2u);
  const auto& t = tg.rollouts[0];
  EXPECT_EQ(t.id, "r1");
  EXPECT_EQ(t.tokens, r.tokens);
  EXPECT_EQ(t.trainable, r.mask);
  EXPECT_EQ(t.behaviour_logprobs, r.logprobs);
  EXPECT_EQ(t.topk, 2);
  EXPECT_EQ(t.topk_ids, r.topk_ids);
  EXPECT_EQ(t.topk_logprobs, r.topk_logprobs);
  EXPECT_DOUBLE_EQ(t.reward, 0.75);
  EXPECT_EQ(t.policy_version, 3);
  EXPECT_DOUBLE_EQ(mean_reward({g}), 0.5);
  EXPECT_DOUBLE_EQ(mean_reward({}), 0.0);
  // The assembled groups pass the trainer's own validation.
  EXPECT_NO_THROW(train::validate_groups(to_rollout_groups({g}), 16, 64));
}

}  // namespace
}  // namespace stoa::trainer
