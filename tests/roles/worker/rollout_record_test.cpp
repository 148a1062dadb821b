// Rollout records: prompt / generated / observation masks, per-token versions across an
// in-flight weight switch, behaviour log-probs, and the structural checks the hub also runs.
#include <gtest/gtest.h>

#include "core/error.h"
#include "roles/worker/rollout_record.h"

namespace stoa::worker {
namespace {

net::Lease make_lease() {
  net::Lease lease;
  lease.lease_id = "l-1";
  lease.group_id = "g-1";
  lease.prompt_id = "p-1";
  lease.prompt_tokens = {5, 6, 7};
  lease.samples = 2;
  return lease;
}

TEST(RolloutRecord, MasksLogprobsAndVersionsPerToken) {
  RolloutRecord rec(make_lease(), "w-1");
  rec.add_generated(10, -0.5f, 3);
  rec.add_generated(11, -1.25f, 3);
  const std::vector<int32_t> obs = {20, 21};
  rec.add_observation(obs);
  rec.add_generated(12, 0.0f, 4);  // generated after an in-flight switch to version 4
  rec.set_answer("x");
  rec.set_turns(2);
  net::RolloutSubmission sub = rec.finish();
  EXPECT_TRUE(net::looks_like_uuid(sub.id));
  EXPECT_EQ(sub.worker_id, "w-1");
  EXPECT_EQ(sub.lease_id, "l-1");
  EXPECT_EQ(sub.group_id, "g-1");
  EXPECT_EQ(sub.prompt_id, "p-1");
  EXPECT_EQ(sub.tokens, (std::vector<int32_t>{5, 6, 7, 10, 11, 20, 21, 12}));
  EXPECT_EQ(sub.mask, (std::vector<uint8_t>{0, 0, 0, 1, 1, 0, 0, 1}));
  EXPECT_EQ(sub.logprobs, (std::vector<float>{0, 0, 0, -0.5f, -1.25f, 0, 0, 0}));
  EXPECT_EQ(sub.versions, (std::vector<uint64_t>{0, 0, 0, 3, 3, 0, 0, 4}));
  EXPECT_EQ(sub.turns, 2);
  EXPECT_EQ(sub.answer, "x");
  EXPECT_EQ(rec.oldest_version(), 3u);
  EXPECT_EQ(rec.generated(), 3u);
  // The wire form round-trips.
  net::RolloutSubmission back = net::rollout_submission_from_json(net::to_json(sub));
  EXPECT_EQ(back.tokens, sub.tokens);
  EXPECT_EQ(back.versions, sub.versions);
  EXPECT_EQ(back.id, sub.id);
}

TEST(RolloutRecord, IdsAreFreshPerRollout) {
  RolloutRecord a(make_lease(), "w"), b(make_lease(), "w");
  EXPECT_NE(a.id(), b.id());
}

TEST(RolloutRecord, TopKRowsArePerPosition) {
  RolloutRecord rec(make_lease(), "w", 2);
  const std::vector<int32_t> ids = {10, 9};
  const std::vector<float> lps = {-0.1f, -2.5f};
  rec.add_generated(10, -0.1f, 1, ids, lps);
  net::RolloutSubmission sub = rec.finish();
  ASSERT_EQ(sub.topk_ids.size(), sub.tokens.size() * 2);
  EXPECT_EQ(sub.topk_ids[6], 10);
  EXPECT_EQ(sub.topk_ids[7], 9);
  EXPECT_FLOAT_EQ(sub.topk_logprobs[7], -2.5f);
  const std::vector<int32_t> one = {10};
  const std::vector<float> one_lp = {-0.1f};
  EXPECT_THROW(rec.add_generated(10, -0.1f, 1, one, one_lp), Error);  // K=2 needs 2
}

TEST(RolloutRecord, BadLogprobsAndMismatchesAreRefused) {
  RolloutRecord rec(make_lease(), "w");
  EXPECT_THROW(rec.add_generated(1, 0.5f, 0), Error);
  EXPECT_THROW(rec.add_generated(1, std::numeric_limits<float>::quiet_NaN(), 0), Error);
  EXPECT_THROW(rec.add_generated(1, -std::numeric_limits<float>::infinity(), 0), Error);
  EXPECT_THROW(rec.oldest_version(), Error);  // nothing generated
  rec.add_generated(1, -1.0f, 0);
  const std::vector<int32_t> other = {5, 6, 7, 2};
  EXPECT_THROW(rec.finish(&other), Error);  // the episode's transcript differs
  const std::vector<int32_t> same = {5, 6, 7, 1};
  EXPECT_NO_THROW(rec.finish(&same));
  net::Lease empty = make_lease();
  empty.prompt_tokens.clear();
  EXPECT_THROW(RolloutRecord(empty, "w"), Error);
}

}  // namespace
}  // namespace stoa::worker
