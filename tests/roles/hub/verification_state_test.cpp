// The hub's verification state on its own (roles/hub/verification/verification_state.h): verdict
// counts by kernel target with labels a worker cannot abuse, the bounded memory of expired check
// jobs, checkers' slots, the counters reported, the blinding of a job before a peer sees it, and
// the peer checks' bookkeeping (peer_checks.cpp), and the canary checks (canary_checks.cpp):
// sources, the one nudged log-prob, quarantine on a pass.
#include "roles/hub/verification/verification_state.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace stoa::hub {
namespace {

TEST(VerificationState, CountsVerdictsByPlainTargetNamesOnly) {
  VerificationState v(nullptr, 1);
  v.count("avx2", true);
  v.count("avx2", false);
  v.count("", true);                      // no name: "unknown"
  v.count("x\"} 1\nstoa_fake 9", false);  // not a plain name: "other"
  v.count(std::string(40, 'a'), true);    // too long: "other"
  EXPECT_EQ(v.passed, 3);
  EXPECT_EQ(v.failed, 2);
  EXPECT_EQ((v.by_target.at("avx2")), (std::array<int64_t, 2>{1, 1}));
  EXPECT_EQ((v.by_target.at("unknown")), (std::array<int64_t, 2>{1, 0}));
  EXPECT_EQ((v.by_target.at("other")), (std::array<int64_t, 2>{1, 1}));
  // A worker naming a new target per rollout cannot grow the map past its bound.
  for (int i = 0; i < 100; ++i) v.count("t" + std::to_string(i), true);
  EXPECT_LE(v.by_target.size(), VerificationState::kMaxTargets);
}

TEST(VerificationState, RemembersExpiredChecksUpToItsBound) {
  VerificationState v(nullptr, 1);
  const size_t n = VerificationState::kMaxExpiredChecks + 10;
  for (size_t i = 0; i < n; ++i) v.remember_expired_check("job-" + std::to_string(i));
  v.remember_expired_check("job-" + std::to_string(n - 1));  // again: no second entry
  EXPECT_EQ(v.expired_checks.size(), VerificationState::kMaxExpiredChecks);
  EXPECT_EQ(v.expired_order.size(), VerificationState::kMaxExpiredChecks);
  EXPECT_FALSE(v.expired_checks.count("job-0"));  // the oldest went first
  EXPECT_TRUE(v.expired_checks.count("job-" + std::to_string(n - 1)));
}

TEST(VerificationState, ReleasingASlotNeverGoesBelowZero) {
  VerificationState v(nullptr, 1);
  v.checkers["w"].in_flight = 1;
  v.release_check_slot("w");
  v.release_check_slot("w");
  v.release_check_slot("unknown");  // no book: nothing made
  EXPECT_EQ(v.checkers.at("w").in_flight, 0u);
  EXPECT_FALSE(v.checkers.count("unknown"));
}

TEST(VerificationState, CountersNamePeerChecksOnlyWhenTheHubRunsThem) {
  VerificationState v(nullptr, 1);
  v.count("avx2", true);
  v.count("avx2", false);
  v.quarantined.insert("w-bad");
  v.escalated["failed"] = 2;
  v.escalated["expired"] = 1;
  std::map<std::string, double> off;
  v.add_counters(off, false);
  EXPECT_EQ(off.at("rollouts_verified"), 2);
  EXPECT_EQ(off.at("verification_failures"), 1);
  EXPECT_EQ(off.at("workers_quarantined"), 1);
  EXPECT_FALSE(off.count("peer_checks_passed"));
  std::map<std::string, double> on;
  v.add_counters(on, true);
  EXPECT_EQ(on.at("checks_escalated"), 3);
  EXPECT_EQ(on.at("checks_escalated_failed"), 2);
  EXPECT_EQ(on.at("peer_checks_waiting"), 0);
}

TEST(VerificationState, BlindedJobsNameNoAuthor) {
  AuditJob job;
  job.rollout.id = "11111111-1111-4111-8111-111111111111";
  job.rollout.worker_id = "w-author";
  job.rollout.lease_id = "l-1";
  job.rollout.group_id = "g-1";
  job.rollout.answer = "a signature";
  job.rollout.turns = 3;
  job.rollout.kernel_target = "avx2";
  job.rollout.tokens = {1, 2, 3};
  const AuditJob blind = blind_check_job(job);
  EXPECT_NE(blind.rollout.id, job.rollout.id);
  EXPECT_EQ(blind.rollout.worker_id, kBlindedId);
  EXPECT_EQ(blind.rollout.lease_id, kBlindedId);
  EXPECT_EQ(blind.rollout.group_id, kBlindedId);
  EXPECT_TRUE(blind.rollout.answer.empty());
  EXPECT_EQ(blind.rollout.turns, 0);
  EXPECT_TRUE(blind.rollout.kernel_target.empty());
  EXPECT_EQ(blind.rollout.tokens, job.rollout.tokens);           // what the replay needs stays
  EXPECT_NE(blind_check_job(job).rollout.id, blind.rollout.id);  // a fresh id per lease
}

// A trusted replay whose queue holds `room` jobs.
class BoundedAuditor : public RolloutAuditor {
 public:
  explicit BoundedAuditor(size_t room) : room_(room) {}
  bool enqueue(AuditJob job) override {
    if (queued.size() >= room_) return false;
    queued.push_back(job.rollout.id);
    return true;
  }
  std::vector<std::string> queued;

 private:
  size_t room_;
};

// A peer job on rollout `id` leased to `checker` as check `job_id`.
void lease_peer_job(VerificationState& v, const std::string& id, const std::string& checker,
                    const std::string& job_id) {
  auto& p = v.peer_jobs[id];
  p.job.rollout.id = id;
  p.job.problem.id = "problem-" + id;
  p.prompt_id = "q-" + id;
  p.checker = checker;
  p.job_id = job_id;
  v.peer_leases[job_id] = id;
  v.checkers[checker].in_flight++;
}

TEST(PeerCheckBooks, AnEndedLeaseFreesTheSlotAndAnExpiredOneIsRemembered) {
  VerificationState v(nullptr, 1);
  lease_peer_job(v, "r1", "w-c", "j1");
  lease_peer_job(v, "r2", "w-c", "j2");
  EXPECT_EQ(v.checked_problem("w-c", "q-r1")->id, "problem-r1");
  EXPECT_FALSE(v.checked_problem("w-other", "q-r1"));  // only its checker may ask the task
  v.end_check_lease("r1", false);                      // answered
  EXPECT_FALSE(v.peer_leases.count("j1"));
  EXPECT_TRUE(v.peer_jobs.at("r1").checker.empty());
  EXPECT_FALSE(v.expired_checks.count("j1"));
  EXPECT_FALSE(v.checked_problem("w-c", "q-r1"));
  v.forget_check("r2");  // its group was dropped while leased
  EXPECT_FALSE(v.peer_jobs.count("r2"));
  EXPECT_TRUE(v.expired_checks.count("j2"));
  EXPECT_EQ(v.checkers.at("w-c").in_flight, 0u);
}

TEST(PeerCheckBooks, TheBacklogDrainsAsTheTrustedReplayHasRoom) {
  BoundedAuditor auditor(2);
  VerificationState v(&auditor, 1);
  for (const char* id : {"a", "b", "c"}) {
    AuditJob job;
    job.rollout.id = id;
    v.backlog.emplace_back(id, job);
  }
  v.drain_backlog();
  EXPECT_EQ(auditor.queued, (std::vector<std::string>{"a", "b"}));
  ASSERT_EQ(v.backlog.size(), 1u);
  EXPECT_EQ(v.backlog.front().first, "c");
}

TEST(PeerCheckBooks, ACheckerTheTrustedReplayContradictsIsJudgedOnce) {
  VerificationState v(nullptr, 1);
  AuditVerdict failed;
  failed.pass = false;
  failed.what = "logprob";
  v.escalations["r1"] = {"w-liar", CheckOpinion::kPass};
  v.escalations["r2"] = {"w-honest", CheckOpinion::kFail};
  v.escalations["r3"] = {"", CheckOpinion::kNone};  // nobody took it: nobody to judge
  const auto liar = v.judge_checker("r1", failed);
  ASSERT_TRUE(liar);
  EXPECT_EQ(liar->first, "w-liar");
  EXPECT_NE(liar->second.find("passed rollout r1"), std::string::npos);
  EXPECT_FALSE(v.judge_checker("r1", failed));  // the escalation is used up
  EXPECT_FALSE(v.judge_checker("r2", failed));
  EXPECT_FALSE(v.judge_checker("r3", failed));
  // The run's task failing says nothing about the checker.
  AuditVerdict environment;
  environment.what = kEnvironmentVerdict;
  v.escalations["r4"] = {"w-x", CheckOpinion::kPass};
  EXPECT_FALSE(v.judge_checker("r4", environment));
  // Nor does the hub's own store lacking a version the rollout names.
  AuditVerdict unreplayable;
  unreplayable.what = kUnreplayableVerdict;
  v.escalations["r5"] = {"w-y", CheckOpinion::kPass};
  EXPECT_FALSE(v.judge_checker("r5", unreplayable));
}

// A rollout of 2 prompt tokens and 4 generated ones at version `version`, as the trusted replay
// passed it.
AuditJob passed_job(const std::string& id, const std::string& author, uint64_t version) {
  AuditJob job;
  job.rollout.id = id;
  job.rollout.worker_id = author;
  job.rollout.prompt_id = "q1";
  job.rollout.tokens = {1, 2, 3, 4, 5, 6};
  job.rollout.mask = {0, 0, 1, 1, 1, 1};
  job.rollout.logprobs = {0, 0, -0.5f, -0.25f, -1.0f, -2.0f};
  job.rollout.versions = std::vector<uint64_t>(6, version);
  job.prompt_length = 2;
  return job;
}

VerifyPolicy canary_policy() {
  VerifyPolicy policy;
  policy.enabled = true;
  policy.peer = true;
  policy.canary_fraction = 0.5;
  policy.max_wait_ms = 60'000;
  policy.peer_lease_ms = 30'000;
  return policy;
}

const auto anyone = [](const std::string&, const std::string&, const std::string&) { return true; };

TEST(CanaryChecks, AnAuditedPassBecomesOneCanaryWithOneLogprobNudgedDown) {
  VerificationState v(nullptr, 7);
  const VerifyPolicy policy = canary_policy();
  const AuditJob job = passed_job("r1", "w-author", 3);
  v.note_canary_candidate(job, "tok", "10.0.0.1", "w-seen", 1000, policy);
  // No source before the trusted verdict; a failed one never becomes a source.
  EXPECT_FALSE(v.lease_canary("w-c", anyone, 1000, 3, 4, policy));
  v.judge_canary_candidate("r1", true);
  // Never to the checker that passed it before its audit.
  EXPECT_FALSE(v.lease_canary("w-seen", anyone, 2000, 3, 4, policy));
  const auto lease = v.lease_canary("w-c", anyone, 2000, 3, 4, policy);
  ASSERT_TRUE(lease);
  EXPECT_EQ(lease->deadline_ms, policy.peer_lease_ms);
  EXPECT_EQ(lease->job.rollout.worker_id, kBlindedId);  // blinded like a real job
  int changed = 0;
  for (size_t i = 0; i < job.rollout.logprobs.size(); ++i) {
    if (lease->job.rollout.logprobs[i] == job.rollout.logprobs[i]) continue;
    ++changed;
    EXPECT_TRUE(job.rollout.mask[i]) << "a prompt token's log-prob was changed";
    EXPECT_LT(lease->job.rollout.logprobs[i], job.rollout.logprobs[i]);
    EXPECT_EQ(v.canaries.at(lease->job_id).position, static_cast<int64_t>(i));
  }
  EXPECT_EQ(changed, 1);
  EXPECT_EQ(v.canaries_leased, 1);
  EXPECT_FALSE(v.lease_canary("w-d", anyone, 2000, 3, 4, policy));  // each source once
}

TEST(CanaryChecks, AStaleOrForbiddenSourceIsNeverLeased) {
  VerificationState v(nullptr, 7);
  const VerifyPolicy policy = canary_policy();
  v.note_canary_candidate(passed_job("r1", "w-author", 3), "tok", "10.0.0.1", "", 0, policy);
  v.judge_canary_candidate("r1", true);
  const auto not_my_team = [](const std::string& token, const std::string&, const std::string&) {
    return token != "tok";
  };
  EXPECT_FALSE(v.lease_canary("w-c", not_my_team, 1000, 3, 4, policy));
  // Versions 3 with the latest at 8 and max_staleness 4: older than any real job could be.
  EXPECT_FALSE(v.lease_canary("w-c", anyone, 1000, 8, 4, policy));
  EXPECT_TRUE(v.canary_sources.empty());  // dropped, not kept for later
}

TEST(CanaryChecks, APassQuarantinesAFailDoesNotAndExpiryFreesTheSlot) {
  VerificationState v(nullptr, 7);
  const VerifyPolicy policy = canary_policy();
  for (const char* id : {"r1", "r2", "r3"}) {
    v.note_canary_candidate(passed_job(id, "w-author", 3), "tok", "a", "", 0, policy);
    v.judge_canary_candidate(id, true);
  }
  v.checkers["w-liar"].in_flight = 1;
  const auto lied = v.lease_canary("w-liar", anyone, 0, 3, 4, policy);
  ASSERT_TRUE(lied);
  AuditVerdict pass;
  pass.pass = true;
  const auto why = v.record_canary("w-liar", lied->job_id, pass);
  ASSERT_TRUE(why);
  EXPECT_NE(why->find("passed canary check"), std::string::npos);
  EXPECT_EQ(v.canaries_passed, 1);
  EXPECT_EQ(v.checkers.at("w-liar").in_flight, 0u);

  const auto honest = v.lease_canary("w-honest", anyone, 0, 3, 4, policy);
  ASSERT_TRUE(honest);
  AuditVerdict fail;
  fail.pass = false;
  fail.position = v.canaries.at(honest->job_id).position;
  EXPECT_FALSE(v.record_canary("w-honest", honest->job_id, fail));
  EXPECT_EQ(v.canaries_caught, 1);

  const auto late = v.lease_canary("w-slow", anyone, 0, 3, 4, policy);
  ASSERT_TRUE(late);
  v.expire_canaries(policy.peer_lease_ms - 1);
  EXPECT_TRUE(v.canaries.count(late->job_id));
  v.expire_canaries(policy.peer_lease_ms);
  EXPECT_FALSE(v.canaries.count(late->job_id));
  EXPECT_EQ(v.canaries_expired, 1);
  EXPECT_TRUE(v.expired_checks.count(late->job_id));  // a late verdict is told why (409)
}

TEST(CanaryChecks, CandidatesAreBoundedAndOverdueOnesGoFirst) {
  VerificationState v(nullptr, 7);
  const VerifyPolicy policy = canary_policy();
  for (int i = 0; i < 40; ++i)
    v.note_canary_candidate(passed_job("r" + std::to_string(i), "w", 3), "t", "a", "", 0, policy);
  EXPECT_LE(v.canary_candidates.size(), 16u);
  // Past max_wait_ms the old candidates will get no verdict: a new one takes their place.
  v.note_canary_candidate(passed_job("new", "w", 3), "t", "a", "", policy.max_wait_ms + 1, policy);
  ASSERT_EQ(v.canary_candidates.size(), 1u);
  EXPECT_EQ(v.canary_candidates.front().first, "new");
}

}  // namespace
}  // namespace stoa::hub
