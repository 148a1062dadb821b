// Sampled verification fails closed (issue 51 item 2): with peer checks off, a flood that fills
// the trusted replay's queue does not let a rollout due for replay (a new worker's first ones, a
// sampled one) train unchecked. A real Hub and a real ValidationQueue of two jobs, nobody leasing
// at first; rollouts the queue cannot take wait in the hub's backlog with their groups held, are
// handed to the queue as it drains, and a group trains only once every rollout of it that was
// due has its verdict. One still waiting past max_wait_s drops its group, train_on_timeout or
// not; past the backlog's bound, at once.
#include <set>

#include "roles/hub/hub_fixture.h"
#include "roles/hub/verification/validation_queue.h"

namespace stoa::hub::testing {
namespace {

struct FloodCase {
  const char* name;
  int64_t first_rollouts;  // due because the worker is new ...
  double fraction;         // ... or because the sample chose it
};

class SampledFailClosed : public HubFixture, public ::testing::WithParamInterface<FloodCase> {
 protected:
  void SetUp() override {
    HubFixture::SetUp();
    config.verify.enabled = true;
    config.verify.peer = false;  // sampled mode
    config.verify.max_queue = 2;
    config.verify.first_rollouts = GetParam().first_rollouts;
    config.verify.fraction = GetParam().fraction;
    config.max_staleness = 1000;
    config.limits.lease_per_worker = {1e9, 1e9};  // the rate limits run on the real clock
    queue = std::make_unique<ValidationQueue>(config.verify.max_queue, 3'600'000);
  }
  void start() {
    open_hub();
    hub->checks().set_auditor(queue.get());
    publish(1);
  }
  // The trainer takes what it may; every rollout of a group it takes must have a verdict.
  size_t train(const std::set<std::string>& verdicts) {
    std::vector<std::string> ids;
    for (const auto& g : hub->take_groups(64, std::chrono::milliseconds(0))) {
      for (const auto& r : g.rollouts)
        EXPECT_TRUE(verdicts.count(r.id)) << "group " << g.group_id << " trains with rollout "
                                          << r.id << ", due for replay and never replayed";
      ids.push_back(g.group_id);
    }
    if (!ids.empty()) {
      StepReport rep;
      rep.step = ++step;
      hub->mark_trained(ids, rep);
    }
    return ids.size();
  }
  // A validator passes every queued job, then the hub's sweep refills the queue.
  void validate_all(std::set<std::string>& verdicts) {
    while (auto job = queue->lease("validator", std::chrono::milliseconds(0))) {
      ASSERT_EQ(queue->complete(job->job_id).status,
                ValidationQueue::Completion::Status::kAccepted);
      AuditVerdict pass;
      pass.pass = true;
      hub->checks().record_verdict(job->job.rollout.id, pass);
      verdicts.insert(job->job.rollout.id);
    }
  }
  // take_groups sweeps verification (at most every 100 ms): the backlog drains into the queue.
  void tick() { clock += 200; }

  std::unique_ptr<ValidationQueue> queue;
  int64_t step = 0;
};

TEST_P(SampledFailClosed, AFloodedQueueHoldsDueGroupsUntilTheirVerdicts) {
  start();
  const std::string flood = join("flood"), fresh = join("fresh");
  std::set<std::string> due;
  for (int i = 0; i < 3; ++i)
    for (const auto& id : submit_group(flood)) due.insert(id);
  for (const auto& id : submit_group(fresh)) due.insert(id);  // the queue is full by now
  auto c = hub->counters();
  EXPECT_EQ(c["verification_pending"], static_cast<double>(due.size()));
  EXPECT_EQ(c["verification_backlog"], static_cast<double>(due.size() - 2));
  EXPECT_EQ(c["verification_skipped_queue_full"], 0);
  std::set<std::string> verdicts;
  EXPECT_EQ(train(verdicts), 0u) << "no verdict yet: every group is held";
  size_t trained = 0;
  for (int round = 0; round < 20 && verdicts.size() < due.size(); ++round) {
    validate_all(verdicts);
    tick();
    trained += train(verdicts);
  }
  EXPECT_EQ(verdicts, due) << "the backlog drained into the queue, every due rollout replayed";
  EXPECT_EQ(trained, 4u);
  EXPECT_EQ(hub->counters()["verification_backlog"], 0);
}

TEST_P(SampledFailClosed, ADueRolloutThatNeverReachedAReplayDropsItsGroupEvenTrainingOnTimeout) {
  config.verify.train_on_timeout = true;  // forgives a slow validator, never a flooded queue
  start();
  const std::string flood = join("flood"), fresh = join("fresh");
  submit_group(flood);  // fills the queue
  submit_group(fresh);  // waits in the backlog
  std::set<std::string> verdicts;
  validate_all(verdicts);  // the flood's two, in the queue
  clock += config.verify.max_wait_ms + 1;
  // The flood's rollouts were replayed; the fresh worker's waited in the backlog past max_wait_s
  // and never reached a replay: its group is dropped, not trained on timeout.
  EXPECT_EQ(train(verdicts), 1u);
  auto c = hub->counters();
  EXPECT_EQ(c["groups_dropped_verify_timeout"], 1);
  EXPECT_EQ(c["verification_backlog"], 0);
  EXPECT_EQ(c["verification_pending"], 0);
}

TEST_P(SampledFailClosed, PastTheBacklogsBoundAGroupIsDroppedNotTrained) {
  config.verify.max_peer_jobs = 1;
  start();
  const std::string flood = join("flood"), fresh = join("fresh");
  submit_group(flood);  // 2 rollouts: the queue is full
  submit_group(fresh);  // 1 waits, 1 has no room: the group is dropped at once
  auto c = hub->counters();
  EXPECT_GE(c["verification_skipped_queue_full"], 1);
  std::set<std::string> verdicts;
  size_t trained = 0;
  for (int round = 0; round < 10; ++round) {
    validate_all(verdicts);
    tick();
    trained += train(verdicts);
  }
  EXPECT_EQ(trained, 1u) << "the flood's group, replayed; never the fresh worker's";
}

INSTANTIATE_TEST_SUITE_P(DueFor, SampledFailClosed,
                         ::testing::Values(FloodCase{"NewWorker", 16, 0.05},
                                           FloodCase{"Sample", 0, 1.0}),
                         [](const auto& param_info) { return std::string(param_info.param.name); });

}  // namespace
}  // namespace stoa::hub::testing
