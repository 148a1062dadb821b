// Replay verification's facade on the hub (roles/hub/verification/verification.h), over a real
// ledger and group book: while off it checks nothing; lease seeds are a function of the lease and
// each is used once; a group waits for its rollout's verdict, and a verdict overdue drops it
// (unless the run trains on timeout); a failed replay quarantines its author and drops its
// groups the trainer has not taken, never one it took; with peer checks a rollout is leased to
// another worker, never its author, and that worker's pass releases the group.
#include "roles/hub/verification/verification.h"

#include <gtest/gtest.h>

#include <memory>

#include "roles/hub/observe/hub_counters.h"
#include "roles/hub/request_error.h"
#include "roles/hub/verification/verification_state.h"
#include "support/temp_dir.h"

namespace stoa::hub {
namespace {

struct RecordingAuditor : RolloutAuditor {
  std::vector<AuditJob> jobs;
  bool enqueue(AuditJob job) override {
    jobs.push_back(std::move(job));
    return true;
  }
};

AuditVerdict verdict(bool pass) {
  AuditVerdict v;
  v.pass = pass;
  if (!pass) {
    v.position = 3;
    v.what = "logprob";
  }
  return v;
}

class VerificationTest : public ::testing::Test {
 protected:
  VerificationTest() {
    config.join_token = "join";
    config.verify.first_rollouts = 100;  // every rollout goes to the trusted replay
    env::QaItem item;
    item.id = "q0";
    item.question = "?";
    deps.prompts = {item};
    deps.clock_ms = [this] { return clock; };
    ledger.start([] {});
  }
  ~VerificationTest() override { ledger.stop(); }

  void add_group(const std::string& group_id) {
    GroupRow row;
    row.id = group_id;
    row.prompt_id = "q0";
    row.samples = 4;
    book.add_group(row);
    ledger.write([row](Ledger& l) { l.put_group(row); });
  }
  // A rollout of `worker` accepted into `group_id` (the group made on first use), in the ledger.
  net::RolloutSubmission store(const std::string& id, const std::string& group_id,
                               const std::string& worker, uint64_t seed = 1) {
    if (!book.groups().count(group_id)) add_group(group_id);
    net::RolloutSubmission m;
    m.id = id;
    m.group_id = group_id;
    m.lease_id = "l-" + group_id;
    m.worker_id = worker;
    m.seed = seed;
    RolloutRow stored;
    stored.id = id;
    stored.group_id = group_id;
    stored.lease_id = m.lease_id;
    stored.worker_id = worker;
    auto row = std::make_shared<const RolloutRow>(std::move(stored));
    ledger.hold_rollout(row, ledger.write([row](Ledger& l) { l.insert_rollout(*row); }));
    return m;
  }
  // Stored, then handed to verification as intake does.
  net::RolloutSubmission accept(const std::string& id, const std::string& group_id,
                                const std::string& worker) {
    net::RolloutSubmission m = store(id, group_id, worker);
    verification.audit(m, book.groups().at(group_id), 3);
    return m;
  }
  WorkerStats& worker(const std::string& id, const std::string& token, const std::string& address) {
    WorkerStats& w = workers[id];
    w.id = id;
    w.token_name = token;
    w.address = address;
    w.last_seen_ms = clock;
    return w;
  }

  testing::TempDir dir{"verification"};
  HubConfig config;
  HubDeps deps;
  int64_t clock = 1000;
  RunLedger ledger{dir.file("ledger.db"), 64};
  GroupBook book{LeaseCaps{}};
  std::set<std::string> taken;
  HubCounters counters;
  std::map<std::string, WorkerStats> workers;
  RecordingAuditor auditor;
  Verification verification{
      VerificationParts{config, deps, ledger, book, taken, counters, workers}};
};

TEST_F(VerificationTest, OffItChecksNothing) {
  EXPECT_FALSE(verification.on());
  EXPECT_TRUE(verification.lease_seeds("l1", 4).empty());
  net::RolloutSubmission m = accept("r1", "g1", "w");
  m.seed.reset();
  EXPECT_FALSE(verification.check_seed(m, LeaseRow{}).has_value());
  EXPECT_FALSE(verification.held_for_verdict("g1"));
  EXPECT_FALSE(verification.quarantined("w"));
  try {
    verification.require_peer_checks();
    FAIL() << "no peer checks while off";
  } catch (const RequestError& e) {
    EXPECT_EQ(e.status(), 404);
  }
}

TEST_F(VerificationTest, LeaseSeedsAreTheLeasesAndEachIsUsedOnce) {
  verification.set_auditor(&auditor);
  const std::vector<uint64_t> seeds = verification.lease_seeds("l-g1", 3);
  ASSERT_EQ(seeds.size(), 3u);
  EXPECT_EQ(verification.lease_seeds("l-g1", 3), seeds);  // a restart gives the same
  EXPECT_NE(verification.lease_seeds("l-g2", 3), seeds);
  LeaseRow lease;
  lease.id = "l-g1";
  lease.group_id = "g1";
  lease.samples = 3;
  lease.issued_ms = clock + 1;  // issued by this hub: no seeds to read back from the ledger
  net::RolloutSubmission m;
  m.id = "r1";
  m.lease_id = lease.id;
  EXPECT_EQ(verification.check_seed(m, lease)->reason, "bad_seed");  // none
  m.seed = seeds[0] + 1;
  EXPECT_EQ(verification.check_seed(m, lease)->reason, "bad_seed");  // not the lease's
  m.seed = seeds[1];
  EXPECT_FALSE(verification.check_seed(m, lease).has_value());
  add_group("g1");
  verification.audit(m, book.groups().at("g1"), 3);
  m.id = "r2";
  EXPECT_EQ(verification.check_seed(m, lease)->reason, "bad_seed");  // used already
}

TEST_F(VerificationTest, AGroupWaitsForItsVerdict) {
  verification.set_auditor(&auditor);
  accept("r1", "g1", "w");
  ASSERT_EQ(auditor.jobs.size(), 1u);
  EXPECT_EQ(auditor.jobs[0].rollout.id, "r1");
  EXPECT_TRUE(verification.held_for_verdict("g1"));
  verification.record_verdict("r1", verdict(true));
  EXPECT_FALSE(verification.held_for_verdict("g1"));
  EXPECT_EQ(verification.state()->passed, 1);
  EXPECT_FALSE(verification.quarantined("w"));
}

TEST_F(VerificationTest, AVerdictOverdueDropsTheGroupUnlessTheRunTrainsOnTimeout) {
  verification.set_auditor(&auditor);
  accept("r1", "g1", "w");
  clock += config.verify.max_wait_ms;
  EXPECT_TRUE(verification.held_for_verdict("g1"));
  EXPECT_EQ(book.groups().at("g1").row.status, GroupStatus::kDropped);
  EXPECT_EQ(book.groups().at("g1").row.drop_reason, "verify_timeout");
  EXPECT_EQ(counters.dropped["verify_timeout"], 1);

  config.verify.train_on_timeout = true;
  accept("r2", "g2", "w");
  clock += config.verify.max_wait_ms;
  EXPECT_FALSE(verification.held_for_verdict("g2"));
  EXPECT_EQ(book.groups().at("g2").row.status, GroupStatus::kOpen);
  EXPECT_EQ(verification.state()->timeouts, 2);
}

TEST_F(VerificationTest, AFailedReplayQuarantinesItsAuthorAndDropsOnlyGroupsNotTaken) {
  verification.set_auditor(&auditor);
  accept("r1", "g1", "liar");
  store("r2", "g2", "liar");  // in a group the trainer took: past recall
  taken.insert("g2");
  store("r3", "g3", "honest");
  verification.record_verdict("r1", verdict(false));
  EXPECT_TRUE(verification.quarantined("liar"));
  EXPECT_FALSE(verification.quarantined("honest"));
  EXPECT_EQ(book.groups().at("g1").row.status, GroupStatus::kDropped);
  EXPECT_EQ(book.groups().at("g1").row.drop_reason, "quarantined");
  EXPECT_EQ(book.groups().at("g2").row.status, GroupStatus::kOpen);
  EXPECT_EQ(book.groups().at("g3").row.status, GroupStatus::kOpen);
  EXPECT_EQ(counters.dropped["quarantined"], 1);
  EXPECT_EQ(verification.state()->failed, 1);
}

// A rollout that waited for its replay until the blobs of its version were pruned (it aged out
// of the staleness window the store keeps) is the hub's own limit: its group is dropped
// unverified and its author keeps its standing.
TEST_F(VerificationTest, AnUnreplayableRolloutDropsItsGroupButBlamesNobody) {
  verification.set_auditor(&auditor);
  accept("r1", "g1", "slow");
  AuditVerdict aged_out;
  aged_out.what = kUnreplayableVerdict;
  aged_out.detail = "catch-up: no route from a cold start to version 11";
  verification.record_verdict("r1", aged_out);
  EXPECT_FALSE(verification.quarantined("slow"));
  EXPECT_FALSE(verification.held_for_verdict("g1"));
  EXPECT_EQ(book.groups().at("g1").row.status, GroupStatus::kDropped);
  EXPECT_EQ(book.groups().at("g1").row.drop_reason, "unreplayable");
  EXPECT_EQ(counters.dropped["unreplayable"], 1);
  EXPECT_EQ(verification.state()->unreplayable, 1);
  EXPECT_EQ(verification.state()->failed, 0);
  EXPECT_EQ(verification.state()->passed, 0);
  // Its next rollout is judged as any other.
  accept("r2", "g2", "slow");
  verification.record_verdict("r2", verdict(false));
  EXPECT_TRUE(verification.quarantined("slow"));
}

TEST_F(VerificationTest, APeerCheckGoesToAnotherWorkerWhosePassReleasesTheGroup) {
  config.verify.peer = true;
  config.verify.first_rollouts = 0;  // past its first rollouts: a peer checks it
  config.verify.audit_fraction = 0;
  config.verify.canary_fraction = 0;
  verification.set_auditor(&auditor);
  worker("author", "token-a", "10.0.0.1").rollouts_accepted = 1;
  worker("checker", "token-c", "10.0.0.2");
  accept("r1", "g1", "author");
  EXPECT_TRUE(auditor.jobs.empty());  // not the trusted replay
  EXPECT_TRUE(verification.held_for_verdict("g1"));
  EXPECT_EQ(verification.checks_waiting(), 1u);
  EXPECT_FALSE(verification.lease_check("author", "", 0).has_value());  // never its own
  std::optional<CheckLease> check = verification.lease_check("checker", "", 0);
  ASSERT_TRUE(check.has_value());
  EXPECT_EQ(check->job.rollout.worker_id, kBlindedId);  // the author goes unnamed
  EXPECT_EQ(verification.checks_waiting(), 0u);
  try {
    verification.record_check("checker", "no-such-job", verdict(true));
    FAIL() << "a job the worker does not hold";
  } catch (const RequestError& e) {
    EXPECT_EQ(e.status(), 404);
  }
  EXPECT_EQ(verification.record_check("checker", check->job_id, verdict(true)), "r1");
  EXPECT_FALSE(verification.held_for_verdict("g1"));
}

}  // namespace
}  // namespace stoa::hub
