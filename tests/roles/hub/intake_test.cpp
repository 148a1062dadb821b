#include <cmath>
#include <functional>

#include "roles/hub/hub_fixture.h"

namespace stoa::hub::testing {
namespace {

class Intake : public HubFixture {
 protected:
  void SetUp() override {
    HubFixture::SetUp();
    open_hub();
    publish(1);
    worker = join("a");
    lease = *hub->lease(worker).lease;
  }
  net::RolloutSubmission good(const std::string& text = "<answer>migraine</answer>") {
    return rollout(worker, lease, text, 1);
  }
  void expect_rejected(const net::RolloutSubmission& m, const std::string& reason) {
    auto r = hub->submit(m.worker_id, m);
    EXPECT_EQ(r.status, net::IntakeStatus::kRejected) << reason;
    EXPECT_EQ(r.reason, reason) << r.detail;
    EXPECT_FALSE(r.detail.empty());
  }
  std::string worker;
  net::Lease lease;
};

TEST_F(Intake, RewardIsRecomputedNotTakenFromTheWorker) {
  // Golden answers of the leased prompt; answer right and wrong.
  const auto prompts = deps().prompts;
  std::string golden;
  for (const auto& p : prompts) {
    if (p.id == lease.prompt_id) golden = p.golden_answers[0];
  }
  auto right = good("<answer>" + golden + "</answer>");
  right.answer = "something else";  // the claimed answer is informational only
  auto r1 = hub->submit(worker, right);
  ASSERT_EQ(r1.status, net::IntakeStatus::kAccepted) << r1.detail;
  EXPECT_EQ(r1.reward, 1.0);
  auto wrong = good("<answer>not it</answer>");
  wrong.answer = golden;
  auto r2 = hub->submit(worker, wrong);
  ASSERT_EQ(r2.status, net::IntakeStatus::kAccepted) << r2.detail;
  EXPECT_EQ(r2.reward, 0.0);
}

TEST_F(Intake, ARetriedSubmissionIsCountedOnce) {
  auto m = good();
  EXPECT_EQ(hub->submit(worker, m).status, net::IntakeStatus::kAccepted);
  EXPECT_EQ(hub->submit(worker, m).status, net::IntakeStatus::kDuplicate);
  EXPECT_EQ(hub->submit(worker, m).status, net::IntakeStatus::kDuplicate);
  auto c = hub->counters();
  EXPECT_EQ(c["rollouts_accepted"], 1);
  EXPECT_EQ(c["rollouts_duplicate"], 2);
  // Also across a restart: the ledger is the idempotency memory.
  open_hub();
  EXPECT_EQ(hub->submit(worker, m).status, net::IntakeStatus::kDuplicate);
  EXPECT_EQ(hub->counters()["rollouts_accepted"], 1);
}

TEST_F(Intake, EachRejectionReason) {
  {
    auto m = good();
    m.lease_id = "l-unknown";
    expect_rejected(m, "unknown_lease");
  }
  {
    auto other = join("b");
    auto m = good();
    m.worker_id = other;
    expect_rejected(m, "lease_worker_mismatch");
  }
  {
    auto m = good();
    m.prompt_id = "q-other";
    expect_rejected(m, "lease_mismatch");
  }
  {
    auto m = good();
    m.tokens[0] ^= 1;
    expect_rejected(m, "prompt_mismatch");
  }
  {
    auto m = good();
    m.mask[1] = 1;
    expect_rejected(m, "prompt_mismatch");
  }
  {
    auto m = good(std::string(3000, 'x'));
    expect_rejected(m, "too_long");
  }
  {
    auto m = good();
    m.tokens.resize(lease.prompt_tokens.size() + 1);
    m.mask.resize(m.tokens.size());
    m.logprobs.resize(m.tokens.size());
    m.versions.resize(m.tokens.size());
    m.mask.back() = 0;
    expect_rejected(m, "no_generated_tokens");
  }
  {
    auto m = good();
    m.tokens.back() = 256;
    expect_rejected(m, "bad_token_id");
  }
  {
    auto m = good();
    m.tokens.back() = -3;
    expect_rejected(m, "bad_token_id");
  }
  for (float bad : {0.5f, std::nanf(""), -INFINITY}) {
    auto m = good();
    m.logprobs.back() = bad;
    expect_rejected(m, "bad_logprob");
  }
  {
    auto m = good();
    m.versions.back() = 7;
    expect_rejected(m, "unknown_version");
  }
  {
    auto m = good();
    m.prompt_version = 7;  // never published: its replay could not even start
    expect_rejected(m, "unknown_version");
  }
  {
    auto m = good();
    m.topk = 1;
    m.topk_ids.assign(m.tokens.size(), 0);
    m.topk_logprobs.assign(m.tokens.size(), -1.0f);
    expect_rejected(m, "topk_mismatch");  // the run asks for no top-K report
  }
  // None of these counted.
  EXPECT_EQ(hub->counters()["rollouts_accepted"], 0);
  EXPECT_GE(hub->counters()["rollouts_rejected"], 14);
}

// What the trainer refuses the hub refuses: one rule (env/rollout_rule.h) on both sides. The
// first three passed the hub's own checks before the rule was shared, and one such rollout ended
// the whole run when its group reached the trainer.
TEST_F(Intake, WhatTheTrainerRefusesTheHubRefuses) {
  config.topk = 2;
  open_hub();
  auto with_rows = [&](const std::function<void(net::RolloutSubmission&, size_t)>& edit) {
    auto m = good();
    m.topk = 2;
    m.topk_ids.assign(m.tokens.size() * 2, 0);
    m.topk_logprobs.assign(m.tokens.size() * 2, -1.0f);
    for (size_t t = 0; t < m.tokens.size(); ++t) {
      if (!m.mask[t]) continue;
      m.topk_ids[2 * t] = m.tokens[t];
      m.topk_ids[2 * t + 1] = (m.tokens[t] + 1) % 256;
      m.topk_logprobs[2 * t] = -0.5f;
      m.topk_logprobs[2 * t + 1] = -2.0f;
      if (edit) edit(m, t);
    }
    return m;
  };
  expect_rejected(with_rows([](auto& m, size_t t) { m.topk_ids[2 * t + 1] = m.tokens[t]; }),
                  "bad_topk");  // a row that repeats an id
  expect_rejected(with_rows([](auto& m, size_t t) {
                    m.topk_logprobs[2 * t] = m.topk_logprobs[2 * t + 1] = -0.05f;
                  }),
                  "bad_topk");  // probabilities summing to 1.9
  {
    auto m = with_rows(nullptr);
    m.topk = 1;  // a K other than the run's, rows well formed
    m.topk_ids.resize(m.tokens.size());
    m.topk_logprobs.resize(m.tokens.size());
    for (size_t t = 0; t < m.tokens.size(); ++t) m.topk_ids[t] = m.tokens[t];
    expect_rejected(m, "topk_mismatch");
  }
  expect_rejected(good(), "topk_mismatch");  // no report where the run asks for one
  auto honest = with_rows(nullptr);
  auto r = hub->submit(worker, honest);
  EXPECT_EQ(r.status, net::IntakeStatus::kAccepted) << r.reason << " " << r.detail;
}

TEST_F(Intake, StalenessWindow) {
  auto old = good();  // version 1
  publish(2);
  publish(3);
  EXPECT_EQ(hub->submit(worker, old).status, net::IntakeStatus::kAccepted);  // 3 - 1 = 2: inside
  publish(4);
  auto stale = good();
  expect_rejected(stale, "stale");  // 4 - 1 = 3 > 2
  // Mixed versions (an in-flight update): the oldest model token decides.
  auto mixed = rollout(worker, lease, "<answer>migraine</answer>", 4);
  mixed.versions[lease.prompt_tokens.size()] = 1;
  expect_rejected(mixed, "stale");
  mixed.versions[lease.prompt_tokens.size()] = 2;
  EXPECT_EQ(hub->submit(worker, mixed).status, net::IntakeStatus::kAccepted);
}

// The prompt's KV version (prompt_version) counts as the rollout's oldest part: published, and
// inside the window, or the replay might find its blobs pruned.
TEST_F(Intake, ThePromptVersionCountsInTheWindow) {
  publish(2);
  publish(3);
  publish(4);
  auto m = rollout(worker, lease, "<answer>migraine</answer>", 4);
  m.prompt_version = 1;
  expect_rejected(m, "stale");  // 4 - 1 = 3 > 2
  m.prompt_version = 5;
  expect_rejected(m, "unknown_version");
  m.prompt_version = 2;
  const auto r = hub->submit(worker, m);
  EXPECT_EQ(r.status, net::IntakeStatus::kAccepted) << r.reason << " " << r.detail;
}

TEST_F(Intake, ClosedAndFullGroups) {
  ASSERT_EQ(hub->submit(worker, good()).status, net::IntakeStatus::kAccepted);
  ASSERT_EQ(hub->submit(worker, good()).status, net::IntakeStatus::kAccepted);
  expect_rejected(good(), "group_full");
  auto groups = hub->take_groups(10, std::chrono::milliseconds(0));
  ASSERT_EQ(groups.size(), 1u);
  StepReport rep;
  rep.step = 1;
  hub->mark_trained({groups[0].group_id}, rep);
  expect_rejected(good(), "group_closed");
}

TEST_F(Intake, AnotherWorkersTokenCannotSubmitForIt) {
  auto other = join("b");
  auto m = good();
  EXPECT_THROW(hub->submit(other, m), RequestError);
}

TEST_F(Intake, TopKWithTheSampledTokenIsAccepted) {
  config.topk = 2;  // the run asks for top-2 (a report of another K is refused: above)
  open_hub();
  auto m = good();
  m.topk = 2;
  for (size_t t = 0; t < m.tokens.size(); ++t) {
    m.topk_ids.push_back(m.tokens[t]);
    m.topk_ids.push_back((m.tokens[t] + 1) % 256);
    m.topk_logprobs.push_back(-0.5f);
    m.topk_logprobs.push_back(-2.0f);
  }
  auto r = hub->submit(worker, m);
  EXPECT_EQ(r.status, net::IntakeStatus::kAccepted) << r.detail;
}

}  // namespace
}  // namespace stoa::hub::testing

namespace stoa::hub::testing {
namespace {

TEST_F(HubFixture, ManyAcceptedRolloutsAllSurviveReopen) {
  // Also the figure for docs/design/hub.md: the cost of one durable (synchronous=FULL) intake.
  config.max_open_groups = 1000;
  config.lease_caps.per_worker = 0;  // one worker leases every group before submitting
  open_hub();
  publish(1);
  auto w = join();
  const int groups = 50;
  std::vector<net::RolloutSubmission> subs;
  for (int g = 0; g < groups; ++g) {
    auto l = *hub->lease(w).lease;
    for (int i = 0; i < l.samples; ++i) subs.push_back(rollout(w, l, "<answer>zentra</answer>", 1));
  }
  auto t0 = std::chrono::steady_clock::now();
  for (const auto& s : subs) ASSERT_EQ(hub->submit(w, s).status, net::IntakeStatus::kAccepted);
  double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  std::printf("intake: %zu durable accepts, %.2f ms each\n", subs.size(), ms / subs.size());
  open_hub();
  EXPECT_EQ(hub->counters()["rollouts_accepted"], static_cast<double>(subs.size()));
  EXPECT_EQ(hub->take_groups(1000, std::chrono::milliseconds(0)).size(),
            static_cast<size_t>(groups));
}

}  // namespace
}  // namespace stoa::hub::testing
