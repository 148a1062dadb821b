#include <algorithm>
#include <chrono>
#include <map>
#include <thread>

#include "roles/hub/hub_fixture.h"

namespace stoa::hub::testing {
namespace {

class Leases : public HubFixture {};

TEST_F(Leases, AGroupIsLeasedOnceUntilItExpires) {
  open_hub();
  publish(1);
  auto a = join("a"), b = join("b");
  auto la = hub->lease(a).lease;
  ASSERT_TRUE(la.has_value());
  EXPECT_EQ(la->samples, 2);
  EXPECT_EQ(la->deadline_unix_ms, clock.load() + config.lease_ttl_ms);
  auto lb = hub->lease(b).lease;
  ASSERT_TRUE(lb.has_value());
  EXPECT_NE(lb->group_id, la->group_id) << "an open lease's group was handed out twice";
  // Past the deadline, a's group is reissued to the next worker that asks.
  clock += config.lease_ttl_ms + 1;
  auto lb2 = hub->lease(b).lease;
  ASSERT_TRUE(lb2.has_value());
  EXPECT_EQ(lb2->group_id, la->group_id);
  EXPECT_EQ(lb2->samples, 2);
  EXPECT_NE(lb2->lease_id, la->lease_id);
  EXPECT_EQ(hub->counters()["leases_expired"], 2);  // la and lb
}

TEST_F(Leases, PromptsWithNoRoomUnderMaxTokensAreSkipped) {
  // Rendered as the hub renders them; max_tokens admits only the shortest prompt.
  std::map<std::string, size_t> len;
  env::EpisodeConfig ec;
  ec.max_turns = config.sampling.max_turns;
  ec.max_observation_tokens = config.sampling.max_observation_tokens;
  for (const auto& q : deps().prompts)
    len[q.id] = env::Episode(*task, q, codec, ec).tokens().size();
  const auto shortest = std::min_element(len.begin(), len.end(),
                                         [](auto& a, auto& b) { return a.second < b.second; });
  ASSERT_LT(shortest->second, std::max_element(len.begin(), len.end(), [](auto& a, auto& b) {
                                return a.second < b.second;
                              })->second);
  config.max_tokens = static_cast<int64_t>(shortest->second) + 1;
  open_hub();
  publish(1);
  auto a = join("a");
  for (int i = 0; i < 4; ++i) {
    auto l = hub->lease(a).lease;
    ASSERT_TRUE(l.has_value());
    EXPECT_EQ(l->prompt_id, shortest->first);
    EXPECT_LT(static_cast<int64_t>(l->prompt_tokens.size()), config.max_tokens);
  }
  EXPECT_GE(hub->counters()["prompts_skipped_too_long"], 1);
  // Nothing fits: no work, and no failure.
  config.max_tokens = 1;
  open_hub();
  EXPECT_FALSE(hub->lease(join("b")).lease.has_value());
  EXPECT_EQ(hub->counters()["prompts_skipped_too_long"], 3);
}

TEST_F(Leases, HeartbeatRenewsUpToTheCap) {
  open_hub();
  publish(1);
  auto a = join("a");
  auto la = *hub->lease(a).lease;
  net::Heartbeat hb;
  hb.worker_id = a;
  hb.leases = {la.lease_id};
  for (int i = 0; i < 2; ++i) {
    clock += config.lease_ttl_ms - 1;
    auto r = hub->heartbeat(a, hb);
    ASSERT_EQ(r.renewed.size(), 1u);
  }
  // Renewed past its first deadline: still a's, not reissued.
  auto other = join("other");
  auto lo = *hub->lease(other).lease;
  EXPECT_NE(lo.group_id, la.group_id);
  // The cap (lease_max_ms after issue) is hard: heartbeats cannot keep a group forever.
  clock = 1'000'000 + config.lease_max_ms + 1;
  hub->heartbeat(a, hb);
  hub->expire_leases();
  auto lo2 = *hub->lease(other).lease;
  EXPECT_EQ(lo2.group_id, la.group_id);
}

TEST_F(Leases, ReleaseReissuesAtOnceAndOnlyTheOwnerMayRelease) {
  open_hub();
  publish(1);
  auto a = join("a"), b = join("b");
  auto la = *hub->lease(a).lease;
  EXPECT_THROW(hub->release(b, la.lease_id), RequestError);
  EXPECT_THROW(hub->release(a, "l-nope"), RequestError);
  hub->release(a, la.lease_id);
  auto lb = *hub->lease(b).lease;
  EXPECT_EQ(lb.group_id, la.group_id);
  EXPECT_EQ(hub->counters()["leases_released"], 1);
}

TEST_F(Leases, OnlyMissingSamplesAreReissued) {
  open_hub();
  publish(1);
  auto a = join("a"), b = join("b");
  auto la = *hub->lease(a).lease;
  ASSERT_EQ(hub->submit(a, rollout(a, la, "<answer>migraine</answer>", 1)).status,
            net::IntakeStatus::kAccepted);
  clock += config.lease_ttl_ms + 1;  // a dies after one of its two samples
  auto lb = *hub->lease(b).lease;
  EXPECT_EQ(lb.group_id, la.group_id);
  EXPECT_EQ(lb.samples, 1);
}

TEST_F(Leases, LateResultCountsOnceThenTheGroupIsFull) {
  // The documented rule: a result for an expired lease is accepted while its group still
  // lacks samples; a group never takes more than G.
  open_hub();
  publish(1);
  auto a = join("a"), b = join("b");
  auto la = *hub->lease(a).lease;
  clock += config.lease_ttl_ms + 1;
  auto lb = *hub->lease(b).lease;
  ASSERT_EQ(lb.group_id, la.group_id);
  auto late = rollout(a, la, "<answer>x</answer>", 1);
  EXPECT_EQ(hub->submit(a, late).status, net::IntakeStatus::kAccepted);
  EXPECT_EQ(hub->submit(b, rollout(b, lb, "<answer>y</answer>", 1)).status,
            net::IntakeStatus::kAccepted);
  auto third = hub->submit(b, rollout(b, lb, "<answer>z</answer>", 1));
  EXPECT_EQ(third.status, net::IntakeStatus::kRejected);
  EXPECT_EQ(third.reason, "group_full");
  auto late2 = hub->submit(a, rollout(a, la, "<answer>w</answer>", 1));
  EXPECT_EQ(late2.reason, "group_full");
  // ... and a retry of the accepted late one is still a duplicate, not a rejection.
  EXPECT_EQ(hub->submit(a, late).status, net::IntakeStatus::kDuplicate);
  // The heartbeat tells b its lease no longer counts.
  net::Heartbeat hb;
  hb.worker_id = b;
  hb.leases = {lb.lease_id};
  EXPECT_EQ(hub->heartbeat(b, hb).cancelled, std::vector<std::string>{lb.lease_id});
}

TEST_F(Leases, BackPressureWhenEnoughGroupsAreOut) {
  config.max_open_groups = 2;
  open_hub();
  publish(1);
  auto a = join("a");
  EXPECT_TRUE(hub->lease(a).lease.has_value());
  EXPECT_TRUE(hub->lease(a).lease.has_value());
  auto none = hub->lease(a);
  EXPECT_FALSE(none.lease.has_value());
  EXPECT_GT(none.retry_after_ms, 0);
}

TEST_F(Leases, LeasesAndPromptCursorSurviveARestart) {
  open_hub();
  publish(1);
  auto a = join("a");
  auto la = *hub->lease(a).lease;
  open_hub();  // restart: a new Hub on the same ledger
  auto b = join("b");
  auto lb = *hub->lease(b).lease;
  EXPECT_NE(lb.group_id, la.group_id) << "a's open lease was forgotten";
  EXPECT_NE(lb.prompt_id, la.prompt_id) << "the prompt cursor restarted";
  // a's lease is still valid after the restart: it can submit to it.
  EXPECT_EQ(hub->submit(a, rollout(a, la, "<answer>q</answer>", 1)).status,
            net::IntakeStatus::kAccepted);
}

// The run's task rendering a prompt slowly (an environment server near its timeout): only the
// lease that needs that prompt waits; the hub's other requests do not queue behind it.
class SlowPromptTask final : public env::Task {
 public:
  explicit SlowPromptTask(const env::Task& inner) : inner_(inner) {}
  std::string name() const override { return inner_.name(); }
  std::string user_prompt(const env::QaItem& problem) const override {
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    return inner_.user_prompt(problem);
  }
  const std::vector<std::string>& stop_strings() const override { return inner_.stop_strings(); }
  env::TurnResult on_turn(const env::QaItem& problem, std::string_view turn_text,
                          bool tools_allowed) const override {
    return inner_.on_turn(problem, turn_text, tools_allowed);
  }
  double reward(std::string_view response_text,
                const std::vector<std::string>& golden_answers) const override {
    return inner_.reward(response_text, golden_answers);
  }

 private:
  const env::Task& inner_;
};

TEST_F(Leases, ASlowPromptHoldsOnlyTheLeaseThatNeedsIt) {
  SlowPromptTask slow(*task);
  HubDeps d = deps();
  d.task = &slow;
  hub = std::make_unique<Hub>(config, d);
  publish(1);
  auto a = join("a"), b = join("b");
  std::optional<net::Lease> leased;
  std::thread first([&] { leased = hub->lease(a).lease; });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // a is rendering its prompt
  const auto t0 = std::chrono::steady_clock::now();
  net::Heartbeat hb;
  hb.worker_id = b;
  hub->heartbeat(b, hb);
  hub->status();
  const auto waited = std::chrono::steady_clock::now() - t0;
  first.join();
  EXPECT_LT(waited, std::chrono::milliseconds(800)) << "a request queued behind the rendering";
  ASSERT_TRUE(leased.has_value()) << "the lease is made once its prompt is rendered";
  EXPECT_FALSE(leased->prompt_tokens.empty());
  // Rendered once: the group's other samples and its reissue take it from the cache.
  const auto t1 = std::chrono::steady_clock::now();
  hub->release(a, leased->lease_id);
  auto again = hub->lease(b).lease;
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(again->prompt_tokens, leased->prompt_tokens);
  EXPECT_LT(std::chrono::steady_clock::now() - t1, std::chrono::milliseconds(800));
  hub.reset();  // before `slow`, which it points to
}

}  // namespace
}  // namespace stoa::hub::testing
