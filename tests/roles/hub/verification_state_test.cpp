// The hub's verification state on its own (roles/hub/verification/verification_state.h): verdict
// counts by kernel target with labels a worker cannot abuse, the bounded memory of expired check
// jobs, checkers' slots, the counters reported, and the blinding of a job before a peer sees it.
#include "roles/hub/verification/verification_state.h"

#include <gtest/gtest.h>

#include <string>

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

}  // namespace
}  // namespace stoa::hub
