// HubChecks (roles/hub/hub_checks.h) on a real Hub in sampled mode (every rollout due for the
// trusted replay, a real ValidationQueue as the auditor): a failed verdict quarantines its worker
// and HubAccess refuses the worker's session from then on; a pass clears the rollout; with no
// peer checks the check routes' calls answer 404; with verification off, verdicts change nothing.
#include <string>
#include <vector>

#include "roles/hub/hub_fixture.h"
#include "roles/hub/request_status.h"
#include "roles/hub/verification/validation_queue.h"

namespace stoa::hub::testing {
namespace {

class HubChecksTest : public HubFixture {
 protected:
  void SetUp() override {
    HubFixture::SetUp();
    config.verify.enabled = true;
    config.verify.peer = false;          // sampled mode: the trusted replay only
    config.verify.first_rollouts = 100;  // every rollout of a new worker is due
    config.max_staleness = 1000;
    config.limits.lease_per_worker = {1e9, 1e9};  // the rate limits run on the real clock
    queue = std::make_unique<ValidationQueue>(16, 3'600'000);
  }
  void start(bool with_auditor = true) {
    open_hub();
    if (with_auditor) hub->checks().set_auditor(queue.get());
    publish(1);
  }
  net::JoinResponse join_as(const std::string& name) {
    net::JoinRequest r;
    r.name = name;
    return hub->join("join-secret", r);
  }

  std::unique_ptr<ValidationQueue> queue;
};

TEST_F(HubChecksTest, AFailedVerdictQuarantinesItsWorkerAndEndsItsSession) {
  start();
  const net::JoinResponse liar = join_as("liar"), honest = join_as("honest");
  const std::vector<std::string> lies = submit_group(liar.worker_id);
  const std::vector<std::string> truths = submit_group(honest.worker_id);
  ASSERT_FALSE(lies.empty());
  ASSERT_FALSE(truths.empty());
  EXPECT_TRUE(hub->take_groups(8, std::chrono::milliseconds(0)).empty()) << "held for replay";

  AuditVerdict pass;
  pass.pass = true;
  for (const auto& id : truths) hub->checks().record_verdict(id, pass);
  AuditVerdict fail;
  fail.position = 3;
  fail.what = "logprob";
  hub->checks().record_verdict(lies.front(), fail);

  EXPECT_TRUE(hub->checks().quarantined(liar.worker_id));
  EXPECT_FALSE(hub->checks().quarantined(honest.worker_id));
  EXPECT_EQ(request_status([&] { hub->access().authenticate(liar.session_token); }), 403);
  EXPECT_EQ(hub->access().authenticate(honest.session_token), honest.worker_id);
  // The honest group, every rollout replayed clean, goes to the trainer; the liar's never does.
  const auto groups = hub->take_groups(8, std::chrono::milliseconds(0));
  ASSERT_EQ(groups.size(), 1u);
  EXPECT_EQ(groups.front().rollouts.front().worker_id, honest.worker_id);
}

TEST_F(HubChecksTest, WithoutPeerChecksTheCheckCallsAnswer404) {
  start();
  const std::string worker = join_as("w").worker_id;
  EXPECT_EQ(request_status([&] { hub->checks().lease_check(worker); }), 404);
  EXPECT_EQ(request_status([&] { hub->checks().record_check(worker, "job-1", AuditVerdict{}); }),
            404);
  EXPECT_EQ(hub->checks().checks_waiting(), 0u);
}

TEST_F(HubChecksTest, WhileVerificationIsOffAVerdictChangesNothing) {
  start(/*with_auditor=*/false);
  const std::string worker = join_as("w").worker_id;
  const std::vector<std::string> ids = submit_group(worker);
  ASSERT_FALSE(ids.empty());
  hub->checks().record_verdict(ids.front(), AuditVerdict{});  // a failure, ignored
  EXPECT_FALSE(hub->checks().quarantined(worker));
  EXPECT_EQ(hub->take_groups(8, std::chrono::milliseconds(0)).size(), 1u);
}

}  // namespace
}  // namespace stoa::hub::testing
