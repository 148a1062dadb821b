// A pipeline group's rollouts at the hub (docs/design/pipeline.md, "Blame on the stage that
// lied"), on a real Hub in sampled mode: a chain signed under the group's keys is accepted; a
// head that forges a stage's commitment, breaks the chain or submits for a group it does not
// head is caught at intake and quarantined; a group the hub does not know is refused without
// blame; and a failed replay that blames a stage quarantines that stage's worker, not the head,
// and drops the groups holding the pipeline group's rollouts.
#include <string>
#include <vector>

#include "core/stage_commitment.h"
#include "roles/hub/hub_fixture.h"
#include "roles/hub/verification/validation_queue.h"

namespace stoa::hub::testing {
namespace {

constexpr uint64_t kGroup = 4242;
constexpr int64_t kLayers = 6;

class PipelineBlame : public HubFixture {
 protected:
  void SetUp() override {
    HubFixture::SetUp();
    config.verify.enabled = true;
    config.verify.peer = false;          // sampled mode: the trusted replay only
    config.verify.first_rollouts = 100;  // every rollout of a new worker is due
    config.max_staleness = 1000;
    config.limits.lease_per_worker = {1e9, 1e9};
    queue = std::make_unique<ValidationQueue>(16, 3'600'000);
    ModelConfig model;
    model.num_layers = kLayers;
    model_ = model;
    open_hub_with_model();
    hub->checks().set_auditor(queue.get());
    publish(1);
    head = join("head");
    middle = join("middle");
    last = join("last");
    signers.workers = {head, middle, last};
    for (int i = 0; i < 3; ++i) {
      keys.push_back(SigningKey::generate());
      signers.keys.push_back(keys.back().public_key());
    }
    hub->set_pipeline_signers([this](uint64_t id) -> std::optional<GroupSigners> {
      if (id != kGroup) return std::nullopt;
      return signers;
    });
  }
  void open_hub_with_model() {
    hub.reset();
    HubDeps d = deps();
    d.model = model_;
    hub = std::make_unique<Hub>(config, d);
  }
  // A chain that holds, each commitment signed with its stage's key.
  std::vector<StageCommitment> chain() const {
    std::vector<StageCommitment> c(3);
    for (int s = 0; s < 3; ++s) {
      StageCommitment& e = c[static_cast<size_t>(s)];
      e.stage = s;
      e.end_layer = 2 * (s + 1);
      e.rows = 30;
      e.draws = s == 2 ? 12 : 0;
      e.out.fill(static_cast<uint8_t>(s + 1));
      if (s > 0) e.in.fill(static_cast<uint8_t>(s));
      sign_commitment(keys[static_cast<size_t>(s)], kGroup, e);
    }
    return c;
  }
  net::RolloutSubmission pipeline_rollout(const std::string& worker, const net::Lease& lease,
                                          std::vector<StageCommitment> commitments) {
    worker::RolloutRecord record(lease, worker);
    for (int32_t id : codec.encode("<answer>migraine</answer>")) record.add_generated(id, -0.5f, 1);
    record.set_answer("<answer>migraine</answer>");
    record.set_replay_info(lease.seeds.at(0), "", 1);
    record.set_pipeline_proof({kGroup, std::move(commitments)});
    return record.finish();
  }
  net::RolloutResponse submit(const std::string& worker, std::vector<StageCommitment> c) {
    const net::Lease lease = *hub->lease(worker).lease;
    return hub->submit(worker, pipeline_rollout(worker, lease, std::move(c)));
  }

  std::unique_ptr<ValidationQueue> queue;
  std::optional<ModelConfig> model_;
  std::vector<SigningKey> keys;  // the stages' own
  GroupSigners signers;
  std::string head, middle, last;
};

TEST_F(PipelineBlame, ASignedChainIsAcceptedAndAStageBlamedByTheReplayIsQuarantined) {
  const net::Lease lease = *hub->lease(head).lease;
  const net::RolloutSubmission m = pipeline_rollout(head, lease, chain());
  const net::RolloutResponse r = hub->submit(head, m);
  ASSERT_EQ(r.status, net::IntakeStatus::kAccepted) << r.reason << ": " << r.detail;
  AuditVerdict fail;
  fail.position = 30;
  fail.what = "logprob";
  fail.blame_stage = 1;
  hub->checks().record_verdict(m.id, fail);
  EXPECT_TRUE(hub->checks().quarantined(middle));
  EXPECT_FALSE(hub->checks().quarantined(head));
  EXPECT_FALSE(hub->checks().quarantined(last));
  // The rollout's group goes (and every other holding the group's work): it was submitted by
  // the head, whom the quarantine of the liar does not touch.
  EXPECT_EQ(hub->counters()["groups_dropped_quarantined"], 1);
}

TEST_F(PipelineBlame, AFailedReplayThatBlamesTheHeadQuarantinesTheHead) {
  const net::Lease lease = *hub->lease(head).lease;
  const net::RolloutSubmission m = pipeline_rollout(head, lease, chain());
  ASSERT_EQ(hub->submit(head, m).status, net::IntakeStatus::kAccepted);
  AuditVerdict fail;
  fail.position = 30;
  fail.what = "token";
  fail.blame_stage = 0;
  hub->checks().record_verdict(m.id, fail);
  EXPECT_TRUE(hub->checks().quarantined(head));
  EXPECT_FALSE(hub->checks().quarantined(middle));
}

TEST_F(PipelineBlame, AHeadThatForgesAStagesCommitmentIsCaughtAtIntake) {
  std::vector<StageCommitment> c = chain();
  c[2].out.fill(7);  // the last stage's draws, rewritten without its key
  const net::RolloutResponse r = submit(head, c);
  EXPECT_EQ(r.status, net::IntakeStatus::kRejected);
  EXPECT_EQ(r.reason, "bad_commitment") << r.detail;
  EXPECT_TRUE(hub->checks().quarantined(head));
  EXPECT_FALSE(hub->checks().quarantined(last));
}

TEST_F(PipelineBlame, ABrokenChainOrAnotherHeadIsCaughtAndAnUnknownGroupBlamesNobody) {
  std::vector<StageCommitment> c = chain();
  c[1].in.fill(9);  // stage 1 says it received other rows than the head sent
  sign_commitment(keys[1], kGroup, c[1]);
  const net::RolloutResponse broken = submit(head, c);
  EXPECT_EQ(broken.reason, "bad_commitment") << broken.detail;
  EXPECT_TRUE(hub->checks().quarantined(head));

  const net::RolloutResponse not_head = submit(middle, chain());
  EXPECT_EQ(not_head.reason, "bad_commitment") << not_head.detail;
  EXPECT_TRUE(hub->checks().quarantined(middle));

  const std::string other = join("other");
  const net::Lease lease = *hub->lease(other).lease;
  net::RolloutSubmission m = pipeline_rollout(other, lease, chain());
  m.pipeline_group = kGroup + 1;
  const net::RolloutResponse unknown = hub->submit(other, m);
  EXPECT_EQ(unknown.reason, "unknown_group") << unknown.detail;
  EXPECT_FALSE(hub->checks().quarantined(other));
}

}  // namespace
}  // namespace stoa::hub::testing
