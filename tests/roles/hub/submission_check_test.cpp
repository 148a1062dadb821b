// Rollout intake as a pure function (roles/hub/submission_check.h): every reason it gives, from a
// snapshot and no hub, and what an acceptance carries.
#include "roles/hub/submission_check.h"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "env/token_codec.h"

namespace stoa::hub {
namespace {

// A task whose reward is whether the response holds the golden answer: the check needs only
// Task::reward.
class ContainsTask : public env::Task {
 public:
  std::string name() const override { return "contains"; }
  std::string user_prompt(const env::QaItem&) const override { return ""; }
  const std::vector<std::string>& stop_strings() const override { return stops_; }
  env::TurnResult on_turn(const env::QaItem&, std::string_view, bool) const override { return {}; }
  double reward(std::string_view response, const std::vector<std::string>& golden) const override {
    return response.find(golden.at(0)) != std::string_view::npos ? 1.0 : 0.0;
  }

 private:
  std::vector<std::string> stops_;
};

class SubmissionCheck : public ::testing::Test {
 protected:
  void SetUp() override {
    lease.id = "l1";
    lease.group_id = "g1";
    lease.worker_id = "w1";
    lease.samples = 2;
    group.id = "g1";
    group.prompt_id = "q1";
    group.samples = 2;
    group.status = GroupStatus::kOpen;
    snapshot.lease = &lease;
    snapshot.group = &group;
    snapshot.prompt = [this]() -> const std::vector<int32_t>& {
      ++prompt_renders;
      return prompt;
    };
    snapshot.published = [this](uint64_t v) { return published.count(v) > 0; };
    snapshot.latest_version = 3;
    snapshot.max_staleness = 2;
    snapshot.limits = env::RolloutLimits{256, 64, 0};
    snapshot.codec = &codec;
    snapshot.task = &task;
    snapshot.golden_answers = &golden;
  }

  // The prompt, then "yes" generated at versions 2, 3, 3.
  net::RolloutSubmission good() const {
    net::RolloutSubmission m;
    m.id = "r1";
    m.worker_id = "w1";
    m.lease_id = "l1";
    m.group_id = "g1";
    m.prompt_id = "q1";
    m.tokens = prompt;
    m.mask.assign(prompt.size(), 0);
    m.logprobs.assign(prompt.size(), 0);
    m.versions.assign(prompt.size(), 0);
    const std::vector<uint64_t> at = {2, 3, 3};
    for (size_t i = 0; i < 3; ++i) {
      m.tokens.push_back(static_cast<int32_t>("yes"[i]));
      m.mask.push_back(1);
      m.logprobs.push_back(-0.5f);
      m.versions.push_back(at[i]);
    }
    return m;
  }

  std::string refused(const net::RolloutSubmission& m, const std::string& caller = "w1") {
    auto verdict = check_submission(caller, m, snapshot);
    auto* r = std::get_if<env::RolloutRejection>(&verdict);
    if (!r) return "accepted";
    EXPECT_EQ(r->detail.rfind("rollout " + m.id, 0), 0u) << r->detail;
    return r->reason;
  }

  LeaseRow lease;
  GroupRow group;
  std::vector<int32_t> prompt{'Q', ':', ' '};
  std::set<uint64_t> published{1, 2, 3};
  int prompt_renders = 0;
  env::ByteCodec codec;
  ContainsTask task;
  std::vector<std::string> golden{"yes"};
  IntakeSnapshot snapshot;
};

TEST_F(SubmissionCheck, AnAcceptanceCarriesTheHubsRewardAndTheVersionSpan) {
  auto verdict = check_submission("w1", good(), snapshot);
  ASSERT_TRUE(std::holds_alternative<SubmissionAccepted>(verdict));
  const auto& ok = std::get<SubmissionAccepted>(verdict);
  EXPECT_EQ(ok.reward, 1.0);
  EXPECT_EQ(ok.min_version, 2u);
  EXPECT_EQ(ok.max_version, 3u);
  EXPECT_EQ(ok.model_tokens, 3);
  EXPECT_EQ(ok.prompt_length, prompt.size());
  golden = {"no"};
  EXPECT_EQ(std::get<SubmissionAccepted>(check_submission("w1", good(), snapshot)).reward, 0.0);
}

TEST_F(SubmissionCheck, EveryReasonOfTheHubsOwn) {
  snapshot.lease = nullptr;
  EXPECT_EQ(refused(good()), "unknown_lease");
  snapshot.lease = &lease;
  EXPECT_EQ(refused(good(), "w2"), "lease_worker_mismatch");
  {
    auto m = good();
    m.prompt_id = "q2";
    EXPECT_EQ(refused(m), "lease_mismatch");
    m = good();
    m.group_id = "g2";
    EXPECT_EQ(refused(m), "lease_mismatch");
  }
  {
    // A rollout of another engine arithmetic (a build before the field, or a lie).
    auto m = good();
    m.arithmetic = 1;
    EXPECT_EQ(refused(m), "arithmetic_mismatch");
  }
  snapshot.group = nullptr;
  EXPECT_EQ(refused(good()), "lease_mismatch");
  snapshot.group = &group;
  lease.state = LeaseState::kRevoked;
  EXPECT_EQ(refused(good()), "lease_revoked");
  lease.state = LeaseState::kOpen;
  for (GroupStatus closed : {GroupStatus::kTrained, GroupStatus::kDropped}) {
    group.status = closed;
    EXPECT_EQ(refused(good()), "group_closed");
  }
  group.status = GroupStatus::kComplete;
  EXPECT_EQ(refused(good()), "group_full");
  group.status = GroupStatus::kOpen;
  snapshot.group_accepted = 2;
  EXPECT_EQ(refused(good()), "group_full");
  snapshot.group_accepted = 1;
  // Nothing so far needed the prompt: it is rendered only once the lease and group are right.
  EXPECT_EQ(prompt_renders, 0);
  {
    auto m = good();
    m.tokens[0] = 'X';
    EXPECT_EQ(refused(m), "prompt_mismatch");
    m = good();
    m.mask[1] = 1;
    m.logprobs[1] = -1;
    EXPECT_EQ(refused(m), "prompt_mismatch");
    m = good();
    m.tokens.resize(2);
    EXPECT_EQ(refused(m), "prompt_mismatch");
  }
  {
    auto m = good();
    m.versions.pop_back();
    EXPECT_EQ(refused(m), "bad_shape");
    m = good();
    m.versions.back() = 9;
    EXPECT_EQ(refused(m), "unknown_version");
  }
  published.insert(5);
  snapshot.latest_version = 5;  // version 2 is 3 behind, the window 2
  EXPECT_EQ(refused(good()), "stale");
  snapshot.max_staleness = 3;
  EXPECT_EQ(refused(good()), "accepted");
}

// The rollout rule's reasons come through with the hub's "rollout <id>" in front.
TEST_F(SubmissionCheck, TheSharedRuleDecidesWhatARolloutMayBe) {
  {
    auto m = good();
    m.tokens.back() = 300;
    EXPECT_EQ(refused(m), "bad_token_id");
  }
  {
    auto m = good();
    m.logprobs.back() = 1.0f;
    EXPECT_EQ(refused(m), "bad_logprob");
  }
  {
    auto m = good();
    m.topk = 1;
    m.topk_ids.assign(m.tokens.size(), 0);
    m.topk_logprobs.assign(m.tokens.size(), -1.0f);
    EXPECT_EQ(refused(m), "topk_mismatch");
    snapshot.limits.topk = 1;
    EXPECT_EQ(refused(m), "bad_topk");  // rows without the sampled token
    for (size_t t = 0; t < m.tokens.size(); ++t) m.topk_ids[t] = m.tokens[t];
    EXPECT_EQ(refused(m), "accepted");
  }
  snapshot.limits.max_tokens = 4;
  EXPECT_EQ(refused(good()), "too_long");
}

}  // namespace
}  // namespace stoa::hub
