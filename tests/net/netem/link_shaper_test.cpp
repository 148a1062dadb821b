// LinkShaper's arithmetic on a clock of its own (no namespaces): serialisation at the rate,
// the drop-tail queue, delay with jitter that never reorders, loss within binomial bounds.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>

#include "net/netem/link_shaper.h"
#include "support/error_of.h"

namespace stoa::net::netem {
namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

double ms(Clock::duration d) {
  return std::chrono::duration<double, std::milli>(d).count();
}

TEST(NetemLinkShaper, SerialisesAtTheRateThenDelays) {
  LinkShaper link(LinkShape{8, 20ms, 0us, 0, 100ms}, Rng(1, 0));  // 8 Mbit/s: 1 ms per 1000 B
  const auto t = Clock::now();
  EXPECT_NEAR(ms(*link.admit(1000, t) - t), 21, 1e-6);
  EXPECT_NEAR(ms(*link.admit(1000, t) - t), 22, 1e-6);          // waited for the first
  EXPECT_NEAR(ms(*link.admit(500, t + 10ms) - t), 30.5, 1e-6);  // the line was idle again
  EXPECT_EQ(link.counters().packets, 3u);
  EXPECT_EQ(link.counters().bytes, 2500u);
}

TEST(NetemLinkShaper, DropsTailPastTheQueue) {
  LinkShaper link(LinkShape{8, 0us, 0us, 0, 10ms}, Rng(1, 0));
  const auto t = Clock::now();
  int admitted = 0;
  for (int i = 0; i < 20; ++i) admitted += link.admit(1000, t).has_value();
  EXPECT_EQ(admitted, 11);  // starts at 0..10 ms; the 12th would wait 11 ms
  EXPECT_EQ(link.counters().overflowed, 9u);
  EXPECT_TRUE(link.admit(1000, t + 50ms).has_value());  // drained
}

TEST(NetemLinkShaper, JitterSpreadsWithoutReordering) {
  LinkShaper link(LinkShape{0, 30ms, 10ms, 0, 100ms}, Rng(7, 0));
  const auto t = Clock::now();
  Clock::time_point last{};
  double lowest = 1e9, highest = 0;
  for (int i = 0; i < 1000; ++i) {
    const auto sent = t + std::chrono::milliseconds(i);
    const auto arrival = *link.admit(100, sent);
    EXPECT_GE(arrival, last);
    last = arrival;
    lowest = std::min(lowest, ms(arrival - sent));
    highest = std::max(highest, ms(arrival - sent));
  }
  EXPECT_GE(lowest, 20 - 1e-6);
  EXPECT_LE(highest, 40 + 1e-6);
  EXPECT_GT(highest - lowest, 15);  // it does spread
}

TEST(NetemLinkShaper, LosesWithinBinomialBounds) {
  const double p = 0.1;
  const int n = 20000;
  LinkShaper link(LinkShape{0, 0us, 0us, p, 100ms}, Rng(3, 0));
  const auto t = Clock::now();
  int lost = 0;
  for (int i = 0; i < n; ++i) lost += !link.admit(1200, t).has_value();
  const double sd = std::sqrt(n * p * (1 - p));
  EXPECT_NEAR(lost, n * p, 5 * sd);
  EXPECT_EQ(link.counters().lost, static_cast<uint64_t>(lost));
}

TEST(NetemLinkShaper, RefusesABadShape) {
  EXPECT_EQ(test::error_of([] { LinkShaper(LinkShape{-1}, Rng(1, 0)); }).kind(),
            ErrorKind::kInvalidArgument);
  EXPECT_EQ(test::error_of([] {
              LinkShaper(LinkShape{0, 0us, 0us, 1.5}, Rng(1, 0));
            }).kind(),
            ErrorKind::kInvalidArgument);
}

}  // namespace
}  // namespace stoa::net::netem
