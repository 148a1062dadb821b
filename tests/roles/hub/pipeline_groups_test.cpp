// The hub's pipeline groups without HTTP (roles/hub/groups/pipeline_groups.h): workers too small
// for the model wait until together they hold it; the fewest stages that fit, the largest span to
// the largest memory; each member learns the next stage's address; a silent member dissolves its
// group and the others are grouped again; the waiting room is bounded; a group that keeps
// breaking is dissolved and the member at fault kept out for a while.
#include <gtest/gtest.h>

#include <set>

#include "core/error.h"
#include "model/memory_need.h"
#include "model/presets.h"
#include "roles/hub/groups/pipeline_groups.h"

namespace stoa::hub {
namespace {

struct PipelineGroupsTest : ::testing::Test {
  void SetUp() override {
    config = preset_config("bench-qwen3");  // 14 layers, ~113M parameters: spans matter
    whole = memory_needed(config).total();
  }
  // The most any stage of a K-stage group needs.
  uint64_t stage_need(int k) const {
    uint64_t most = 0;
    for (const LayerSpan& s : split_layers(config, k))
      most = std::max(most, memory_needed(config, s).total());
    return most;
  }
  ModelConfig config;
  uint64_t whole = 0;
};

TEST_F(PipelineGroupsTest, WorkersWaitUntilTogetherTheyHoldTheModel) {
  PipelineGroupOptions o;
  o.max_stages = 4;
  PipelineGroups groups(config, o);
  const uint64_t fits3 = stage_need(3);  // not enough for 2 stages
  ASSERT_LT(fits3, stage_need(2));
  EXPECT_FALSE(groups.place("a", fits3, "10.0.0.1:7001", 0));
  EXPECT_FALSE(groups.place("b", fits3, "10.0.0.2:7002", 0));
  EXPECT_EQ(groups.waiting(), 2u);
  const auto c = groups.place("c", fits3, "10.0.0.3:7003", 0);
  ASSERT_TRUE(c);  // three of them hold it: a group of 3
  EXPECT_EQ(c->stages, 3);
  EXPECT_EQ(groups.groups(), 1u);
  EXPECT_EQ(groups.waiting(), 0u);
  const auto a = groups.place("a", fits3, "10.0.0.1:7001", 10);
  const auto b = groups.place("b", fits3, "10.0.0.2:7002", 10);
  ASSERT_TRUE(a && b);
  // One place each, spans covering the model in order, each linked to the next stage.
  std::map<int, std::pair<LayerSpan, std::string>> by_stage;
  std::map<int, std::string> address = {};
  for (const auto& [p, addr] :
       {std::pair{*a, "10.0.0.1:7001"}, {*b, "10.0.0.2:7002"}, {*c, "10.0.0.3:7003"}}) {
    EXPECT_EQ(p.group_id, c->group_id);
    by_stage[p.stage] = {p.span, p.next};
    address[p.stage] = addr;
  }
  ASSERT_EQ(by_stage.size(), 3u);
  EXPECT_EQ(by_stage[0].first.first, 0);
  EXPECT_EQ(by_stage[2].first.last, config.num_layers);
  for (int s = 0; s < 2; ++s) {
    EXPECT_EQ(by_stage[s].first.last, by_stage[s + 1].first.first);
    EXPECT_EQ(by_stage[s].second, address[s + 1]);
  }
  EXPECT_EQ(by_stage[2].second, "");
}

TEST_F(PipelineGroupsTest, TheFewestStagesThatFitAndTheBiggestSpanToTheBiggestMemory) {
  PipelineGroups groups(config);
  const uint64_t big = stage_need(2), small = stage_need(3);
  EXPECT_FALSE(groups.place("small", small, "h:1", 0));
  const auto p = groups.place("big", big, "h:2", 0);
  // big + small cannot make 2 stages (small cannot hold half), nor 3 with only two workers.
  EXPECT_FALSE(p);
  const auto q = groups.place("big2", big, "h:3", 0);
  ASSERT_TRUE(q);  // two big ones: 2 stages; the small one waits on
  EXPECT_EQ(q->stages, 2);
  EXPECT_EQ(groups.waiting(), 1u);
  EXPECT_FALSE(groups.place("small", small, "h:1", 1));
}

TEST_F(PipelineGroupsTest, ASilentMemberDissolvesItsGroupAndTheOthersAreGroupedAgain) {
  PipelineGroupOptions o;
  o.member_timeout_ms = 1000;
  PipelineGroups groups(config, o);
  const uint64_t m = stage_need(2);
  EXPECT_FALSE(groups.place("a", m, "h:1", 0));
  const auto b = groups.place("b", m, "h:2", 0);
  ASSERT_TRUE(b);
  EXPECT_FALSE(groups.place("c", m, "h:3", 500));  // waits: nobody else is free
  // a keeps asking, b falls silent: past the timeout the group is gone, and a and c are grouped.
  ASSERT_TRUE(groups.place("a", m, "h:1", 900));
  EXPECT_FALSE(groups.place("c", m, "h:3", 900));
  const auto a = groups.place("a", m, "h:1", 1600);
  EXPECT_EQ(groups.groups_dissolved(), 1u);
  const auto c = groups.place("c", m, "h:3", 1600);
  ASSERT_TRUE(a && c);
  EXPECT_NE(a->group_id, b->group_id);
  EXPECT_EQ(a->group_id, c->group_id);
  EXPECT_EQ(groups.groups_formed(), 2u);
  // A member that comes back with another address (a restart) loses its place and its group:
  // a new one is formed, which the others learn at their next ask.
  const auto c2 = groups.place("c", m, "h:9", 1700);
  ASSERT_TRUE(c2);
  EXPECT_NE(c2->group_id, c->group_id);
  EXPECT_EQ(groups.groups_dissolved(), 2u);
  const auto a2 = groups.place("a", m, "h:1", 1700);
  ASSERT_TRUE(a2);
  EXPECT_EQ(a2->group_id, c2->group_id);
  groups.leave("a");
  EXPECT_EQ(groups.waiting(), 1u);
  EXPECT_EQ(groups.groups(), 0u);
}

TEST_F(PipelineGroupsTest, TheWaitingRoomIsBoundedAndTooSmallWorkersNeverGroup) {
  PipelineGroupOptions o;
  o.max_waiting = 3;
  PipelineGroups groups(config, o);
  for (const char* w : {"x", "y", "z"}) EXPECT_FALSE(groups.place(w, 1000, "h:1", 0));
  EXPECT_THROW(groups.place("w", 1000, "h:1", 0), Error);
  EXPECT_EQ(groups.groups(), 0u);
  EXPECT_FALSE(groups.place("x", 1000, "h:1", 5));  // those already waiting may ask again
}

TEST_F(PipelineGroupsTest, AStageBehindNatIsReachedThroughTheRelayUnderAKeyOfItsHop) {
  PipelineGroupOptions o;
  o.max_stages = 3;
  PipelineGroups groups(config, o);
  const uint64_t m = stage_need(3);
  EXPECT_FALSE(groups.place("a", m, "h:1", 0, /*relayed=*/true));
  EXPECT_FALSE(groups.place("b", m, "h:2", 0, /*relayed=*/true));
  ASSERT_TRUE(groups.place("c", m, "h:3", 0));
  std::map<int, PipelineMemberPlace> by_stage;
  std::map<int, std::string> who;
  for (const char* w : {"a", "b", "c"}) {
    const auto p = groups.place(w, m,
                                std::string("h:") + (w[0] == 'a'   ? "1"
                                                     : w[0] == 'b' ? "2"
                                                                   : "3"),
                                1, w[0] != 'c');
    ASSERT_TRUE(p) << w;
    by_stage[p->stage] = *p;
    who[p->stage] = w;
  }
  EXPECT_TRUE(by_stage[0].serve_key.empty());  // nobody dials the head
  for (int s = 1; s < 3; ++s) {
    const bool relayed = who[s] != "c";
    EXPECT_EQ(by_stage[s].serve_key.empty(), !relayed) << s;
    // The stage before reaches it under the same key, or at its address.
    EXPECT_EQ(by_stage[s - 1].next_key, by_stage[s].serve_key) << s;
    EXPECT_EQ(by_stage[s - 1].next.empty(), relayed) << s;
  }
  std::set<std::string> keys;
  for (const auto& [stage, p] : by_stage) {
    if (!p.serve_key.empty()) {
      EXPECT_TRUE(keys.insert(p.serve_key).second);  // a key per hop
    }
  }
}

// Three workers asking at `now`, each with its report: the places by stage, and who holds each.
struct Placed {
  std::map<int, PipelineMemberPlace> by_stage;
  std::map<int, std::string> who;
};
Placed place_all(PipelineGroups& groups, uint64_t memory, const std::vector<std::string>& workers,
                 int64_t now) {
  Placed p;
  for (const std::string& w : workers) {
    const auto place = groups.place(w, memory, "h:" + w, now);
    if (!place) continue;
    p.by_stage[place->stage] = *place;
    p.who[place->stage] = w;
  }
  return p;
}

TEST_F(PipelineGroupsTest, AGroupWhoseStageRefusesIsDissolvedAndThatMemberKeptOutForAWhile) {
  PipelineGroupOptions o;
  o.max_stages = 2;
  o.max_breaks = 3;
  o.bench_ms = 10'000;
  o.member_timeout_ms = 60'000;
  PipelineGroups groups(config, o);
  const uint64_t m = stage_need(2);
  Placed g = place_all(groups, m, {"a", "b"}, 0);
  g = place_all(groups, m, {"a", "b"}, 0);
  ASSERT_EQ(g.by_stage.size(), 2u);
  const uint64_t id = g.by_stage[0].group_id;
  const std::string head = g.who[0], refuser = g.who[1];
  EXPECT_FALSE(groups.place("c", m, "h:c", 0));  // a spare waits
  // Two breaks naming stage 1: the group holds (a break now and then is a restart, a slow sync).
  for (int64_t breaks = 1; breaks <= 2; ++breaks)
    ASSERT_TRUE(groups.place(head, m, "h:" + head, 100 * breaks, false, {id, breaks, 1, 0}));
  EXPECT_EQ(groups.groups_dissolved(), 0u);
  // A stale report of another group changes nothing.
  ASSERT_TRUE(groups.place(head, m, "h:" + head, 300, false, {id + 7, 50, 1, 0}));
  EXPECT_EQ(groups.groups(), 1u);
  // The third: the group goes, the refuser is kept out; the head and the spare are grouped.
  const auto head_again = groups.place(head, m, "h:" + head, 400, false, {id, 3, 1, 0});
  EXPECT_EQ(groups.groups_dissolved(), 1u);
  EXPECT_EQ(groups.groups_broken(), 1u);
  EXPECT_EQ(groups.benched(400), 1u);
  ASSERT_TRUE(head_again);
  EXPECT_NE(head_again->group_id, id);
  EXPECT_FALSE(groups.place(refuser, m, "h:" + refuser, 500));
  EXPECT_TRUE(groups.place("c", m, "h:c", 500));
  // Leaving and coming back does not end the bench; a fourth worker is grouped before it.
  groups.leave(refuser);
  EXPECT_FALSE(groups.place(refuser, m, "h:" + refuser, 600));
  EXPECT_FALSE(groups.place("d", m, "h:d", 700));
  EXPECT_FALSE(groups.place(refuser, m, "h:" + refuser, 9'000));
  // Past the bench it is grouped again.
  EXPECT_TRUE(groups.place(refuser, m, "h:" + refuser, 10'500));
  EXPECT_EQ(groups.benched(10'500), 0u);
}

TEST_F(PipelineGroupsTest, BreaksSpreadPastTheWindowDissolveNothing) {
  PipelineGroupOptions o;
  o.max_stages = 2;
  o.break_window_ms = 1000;
  o.member_timeout_ms = 60'000;
  PipelineGroups groups(config, o);
  const uint64_t m = stage_need(2);
  Placed g = place_all(groups, m, {"a", "b"}, 0);
  g = place_all(groups, m, {"a", "b"}, 0);
  const uint64_t id = g.by_stage[0].group_id;
  for (int64_t breaks = 1; breaks <= 6; ++breaks)
    ASSERT_TRUE(groups.place(g.who[0], m, "h:" + g.who[0], 600 * breaks, false, {id, breaks, 1, 0}))
        << breaks;
  EXPECT_EQ(groups.groups_dissolved(), 0u);
  // Many at once (one ask after several breaks) count as many.
  EXPECT_FALSE(groups.place(g.who[0], m, "h:" + g.who[0], 4000, false, {id, 9, 1, 0}));
  EXPECT_EQ(groups.groups_broken(), 1u);
}

// A stall or a dead link names no stage: the stage before the one at fault sees it first.
TEST_F(PipelineGroupsTest, AStallIsBlamedOnTheStageAfterTheDeepestOneItFailed) {
  for (const bool stage1_saw_it : {true, false}) {
    PipelineGroupOptions o;
    o.max_stages = 3;
    o.member_timeout_ms = 60'000;
    PipelineGroups groups(config, o);
    const uint64_t m = stage_need(3);
    ASSERT_LT(m, stage_need(2));
    Placed g = place_all(groups, m, {"a", "b", "c"}, 0);
    g = place_all(groups, m, {"a", "b", "c"}, 0);
    ASSERT_EQ(g.by_stage.size(), 3u);
    const uint64_t id = g.by_stage[0].group_id;
    // Stage 1 says its next stage stalled (or nothing); stage 2 says nothing.
    ASSERT_TRUE(
        groups.place(g.who[1], m, "h:" + g.who[1], 10, false, {id, 0, -1, stage1_saw_it ? 2 : 0}));
    ASSERT_TRUE(groups.place(g.who[2], m, "h:" + g.who[2], 10, false, {id, 0, -1, 0}));
    EXPECT_FALSE(groups.place(g.who[0], m, "h:" + g.who[0], 20, false, {id, 3, -1, 0}));
    EXPECT_EQ(groups.groups_broken(), 1u);
    // The one at fault: stage 2 when stage 1 saw it stall, else stage 1 (the head's own link).
    const std::string at_fault = stage1_saw_it ? g.who[2] : g.who[1];
    for (int s = 0; s < 3; ++s) {
      EXPECT_FALSE(groups.place(g.who[s], m, "h:" + g.who[s], 30)) << s;  // two cannot hold it
    }
    EXPECT_EQ(groups.benched(30), 1u);
    groups.place("spare", m, "h:spare", 40);
    for (int s = 0; s < 3; ++s) {
      EXPECT_EQ(groups.place(g.who[s], m, "h:" + g.who[s], 50).has_value(), g.who[s] != at_fault)
          << "stage " << s << " (" << g.who[s] << "), stage 1 saw it: " << stage1_saw_it;
    }
  }
}

}  // namespace
}  // namespace stoa::hub
