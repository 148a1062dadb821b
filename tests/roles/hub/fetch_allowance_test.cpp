// What the hub sends each worker of each blob (roles/hub/store/fetch_allowance.h), on an injected
// clock: a bucket of `fetches` blob sizes per (worker, blob), refused with the wait until it
// would fit, given back when a reply is cut, refilled by one size per period, never smaller
// than min_bytes, unbounded at 0, and bounded in memory.
#include "roles/hub/store/fetch_allowance.h"

#include <gtest/gtest.h>

namespace stoa::hub {
namespace {

using std::chrono::seconds;
constexpr uint64_t kMiB = 1u << 20;

FetchAllowanceOptions options(double fetches = 4) {
  FetchAllowanceOptions o;
  o.fetches = fetches;
  o.refill = seconds(3600);
  return o;
}

TEST(FetchAllowance, AWorkerTakesEachBlobAFewTimesThenWaits) {
  FetchAllowance a(options());
  const auto t0 = FetchAllowance::Clock::now();
  const Hash128 blob{1, 2}, other{3, 4};
  for (int i = 0; i < 4; ++i) EXPECT_EQ(a.take("w1", blob, 100 * kMiB, 100 * kMiB, t0), seconds(0));
  // The fifth copy waits for one blob size to grow back: the whole refill period.
  EXPECT_EQ(a.take("w1", blob, 100 * kMiB, 100 * kMiB, t0), seconds(3600));
  // A range the bucket can still not cover is refused too; nothing was taken by the refusals.
  EXPECT_EQ(a.take("w1", blob, 100 * kMiB, 1 * kMiB, t0), seconds(36));
  // Others are not charged for it: another worker, another blob.
  EXPECT_EQ(a.take("w2", blob, 100 * kMiB, 100 * kMiB, t0), seconds(0));
  EXPECT_EQ(a.take("w1", other, 100 * kMiB, 100 * kMiB, t0), seconds(0));
  const FetchAllowanceStats s = a.stats();
  EXPECT_EQ(s.refusals, 2u);
  EXPECT_EQ(s.refused_bytes, 101 * kMiB);
  EXPECT_EQ(s.buckets, 3u);
}

TEST(FetchAllowance, ACutReplyGivesBackWhatItDidNotSend) {
  FetchAllowance a(options(1));
  const auto t0 = FetchAllowance::Clock::now();
  const Hash128 blob{5, 6};
  ASSERT_EQ(a.take("w", blob, 64 * kMiB, 64 * kMiB, t0), seconds(0));
  // Cut after 16 MiB: the resume of the other 48 MiB fits, and then nothing more.
  a.give_back("w", blob, 48 * kMiB);
  EXPECT_EQ(a.take("w", blob, 64 * kMiB, 48 * kMiB, t0), seconds(0));
  EXPECT_GT(a.take("w", blob, 64 * kMiB, 1, t0), seconds(0));
  // A bucket never holds more than it started with.
  a.give_back("w", blob, 1000 * kMiB);
  EXPECT_EQ(a.take("w", blob, 64 * kMiB, 64 * kMiB, t0), seconds(0));
  EXPECT_GT(a.take("w", blob, 64 * kMiB, 1, t0), seconds(0));
}

TEST(FetchAllowance, TheBucketGrowsBackByOneBlobPerPeriod) {
  FetchAllowance a(options(2));
  const auto t0 = FetchAllowance::Clock::now();
  const Hash128 blob{7, 8};
  ASSERT_EQ(a.take("w", blob, 10 * kMiB, 20 * kMiB, t0), seconds(0));
  EXPECT_EQ(a.take("w", blob, 10 * kMiB, 10 * kMiB, t0 + seconds(1800)), seconds(1800));
  EXPECT_EQ(a.take("w", blob, 10 * kMiB, 10 * kMiB, t0 + seconds(3600)), seconds(0));
  // Days later the bucket is full again, and no fuller.
  EXPECT_EQ(a.take("w", blob, 10 * kMiB, 20 * kMiB, t0 + seconds(86400)), seconds(0));
  EXPECT_GT(a.take("w", blob, 10 * kMiB, 1 * kMiB, t0 + seconds(86400)), seconds(0));
}

TEST(FetchAllowance, TinyBlobsHaveAFloorAndZeroMeansNoBound) {
  FetchAllowance a(options());
  const auto t0 = FetchAllowance::Clock::now();
  const Hash128 tiny{9, 9};
  for (int i = 0; i < 1000; ++i) ASSERT_EQ(a.take("w", tiny, 1000, 1000, t0), seconds(0));
  FetchAllowance unbounded(options(0));
  for (int i = 0; i < 100; ++i)
    ASSERT_EQ(unbounded.take("w", tiny, 100 * kMiB, 100 * kMiB, t0), seconds(0));
  EXPECT_EQ(unbounded.stats().buckets, 0u);
}

TEST(FetchAllowance, MemoryIsBoundedAndFullBucketsGoFirst) {
  FetchAllowanceOptions o = options(1);
  o.max_entries = 8;
  FetchAllowance a(o);
  const auto t0 = FetchAllowance::Clock::now();
  const Hash128 blob{1, 1};
  // w0's bucket is spent; w1..w7 each took a byte and gave it back: their buckets are full.
  ASSERT_EQ(a.take("w0", blob, 10 * kMiB, 10 * kMiB, t0), seconds(0));
  for (int i = 1; i < 8; ++i) {
    ASSERT_EQ(a.take("w" + std::to_string(i), blob, 10 * kMiB, 1, t0), seconds(0));
    a.give_back("w" + std::to_string(i), blob, 1);
  }
  EXPECT_EQ(a.stats().buckets, 8u);
  // A ninth worker makes room by forgetting the full buckets: w0 is still charged.
  ASSERT_EQ(a.take("w8", blob, 10 * kMiB, 10 * kMiB, t0), seconds(0));
  EXPECT_LE(a.stats().buckets, 2u);
  EXPECT_GT(a.take("w0", blob, 10 * kMiB, 1, t0), seconds(0));
  // Spent buckets only: the half touched longest ago goes, and the count stays under the bound.
  for (int i = 9; i < 40; ++i)
    ASSERT_EQ(a.take("w" + std::to_string(i), blob, 10 * kMiB, 10 * kMiB, t0 + seconds(i)),
              seconds(0));
  EXPECT_LE(a.stats().buckets, 8u);
}

}  // namespace
}  // namespace stoa::hub
