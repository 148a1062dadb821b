// The worker's tokens/s over a rolling window (roles/worker/token_rate.h): a worker that pauses
// between leases still reports what it produced over the last 30 s, not 0 for the quiet beat.
#include <gtest/gtest.h>

#include "roles/worker/token_rate.h"

namespace stoa::worker {
namespace {
using namespace std::chrono_literals;

TEST(RollingRate, CountsTheWholeWindowNotJustTheLastInterval) {
  RollingRate rate(30s);
  const auto t0 = RollingRate::Clock::time_point{} + 1000s;
  EXPECT_EQ(rate.sample(0, t0), 0.0);  // one sample: no rate yet
  // 500 tokens in the first 5 s, then a 5 s pause (a beat with no token at all).
  EXPECT_DOUBLE_EQ(rate.sample(500, t0 + 5s), 100.0);
  EXPECT_DOUBLE_EQ(rate.sample(500, t0 + 10s), 50.0);  // per-interval: 0
  EXPECT_DOUBLE_EQ(rate.sample(800, t0 + 15s), 800.0 / 15);
}

TEST(RollingRate, ForgetsWhatIsOlderThanTheWindow) {
  RollingRate rate(30s);
  const auto t0 = RollingRate::Clock::time_point{} + 1000s;
  rate.sample(0, t0);
  rate.sample(3000, t0 + 5s);  // a burst long ago
  for (int s = 10; s <= 60; s += 5) rate.sample(3000 + 10 * (s - 5), t0 + std::chrono::seconds(s));
  // 10 tokens/s for the last 55 s; the window (30 s, plus the sample just before it) sees that.
  EXPECT_NEAR(rate.sample(3000 + 10 * 60, t0 + 65s), 10.0, 1e-9);
  // Idle for a whole window: 0.
  EXPECT_EQ(rate.sample(3600, t0 + 100s), 0.0);
  EXPECT_EQ(rate.sample(3600, t0 + 130s), 0.0);
}

TEST(RollingRate, ACounterThatRestartsStartsAfresh) {
  RollingRate rate(30s);
  const auto t0 = RollingRate::Clock::time_point{} + 1000s;
  rate.sample(1000, t0);
  rate.sample(2000, t0 + 10s);
  EXPECT_EQ(rate.sample(5, t0 + 11s), 0.0);  // never negative, never a wrap-around giant
  EXPECT_DOUBLE_EQ(rate.sample(105, t0 + 12s), 100.0);
}

}  // namespace
}  // namespace stoa::worker
