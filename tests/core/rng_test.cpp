// The one generator against the published algorithms (splitmix64's known outputs from state 0,
// xoshiro256** stepped by an independent transcription of the reference C code), the streams
// its former wrappers produced (first outputs pinned from an independent Python transcription of
// their seeding, so model init and generated data stay what they were), and the helpers:
// range, bias-free bounded integers, shuffle, fork, state round trip, normals, portable_log.
#include "core/rng.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

namespace stoa {
namespace {

TEST(Rng, SplitmixKnownAnswers) {
  uint64_t x = 0;
  EXPECT_EQ(splitmix64(&x), 0xe220a8397b1dcdafull);
  EXPECT_EQ(splitmix64(&x), 0x6e789e6aa1b965f4ull);
  EXPECT_EQ(splitmix64(&x), 0x06c45d188009454full);
  EXPECT_EQ(splitmix64(&x), 0xf88bb8a8724c81ecull);
}

TEST(Rng, StarStarKnownAnswers) {
  Rng g(0, 0);
  EXPECT_EQ(g.state()[0], 0xe220a8397b1dcdafull);
  EXPECT_EQ(g.state()[3], 0xf88bb8a8724c81ecull);
  EXPECT_EQ(g.next(), 0x99ec5f36cb75f2b4ull);
  EXPECT_EQ(g.next(), 0xbf6e1f784956452aull);
  EXPECT_EQ(g.next(), 0x1a5f849d4933e6e0ull);
}

// Model init's NormalRng(seed, stream) drew from seed ^ (stream * K); the data generator's
// Prng(seed) from seed alone (stream 0) and its fork(salt) from s0 ^ s3 ^ salt * golden.
TEST(Rng, FormerStreamsAreUnchanged) {
  Rng model(123, 456);
  EXPECT_EQ(model.next(), 0x8c12a0dce921d5d0ull);
  EXPECT_EQ(model.next(), 0xbed2766f22df8288ull);
  Rng data(7, 0);
  const Rng child = data.fork(2);
  EXPECT_EQ(data.next(), 0xb358faf74ef9765aull);
  EXPECT_EQ(data.next(), 0x475c3d964f482cd2ull);
  Rng forked = child;
  EXPECT_EQ(forked.next(), 0x7ef75c33882b978full);
  EXPECT_EQ(forked.next(), 0x4ce41640d7cfbcb8ull);
  // A fork depends on the parent's state when forked, not on later use of the parent.
  Rng parent(7, 0);
  const Rng early = parent.fork(2);
  EXPECT_EQ(early.state(), child.state());
  EXPECT_NE(parent.fork(3).state(), child.state());
}

TEST(Rng, StreamsAndSeedsDiffer) {
  EXPECT_NE(Rng(1, 0).next(), Rng(1, 1).next());
  EXPECT_NE(Rng(1, 0).next(), Rng(2, 0).next());
}

TEST(Rng, StateRoundTripContinuesTheSequence) {
  Rng a(42, 3);
  a.next();
  Rng b = Rng::from_state(a.state());
  for (int i = 0; i < 100; ++i) ASSERT_EQ(a.next(), b.next());
}

TEST(Rng, UniformsAreInRangeAndDeterministic) {
  Rng a(42, 0), b(42, 0);
  double sum = 0, sum_f = 0;
  for (int i = 0; i < 10000; ++i) {
    const double u = a.uniform();
    ASSERT_EQ(u, b.uniform());
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    sum += u;
    const float f = a.uniform_float();
    ASSERT_EQ(f, b.uniform_float());
    ASSERT_GE(f, 0.0f);
    ASSERT_LT(f, 1.0f);
    sum_f += f;
  }
  EXPECT_NEAR(sum / 10000, 0.5, 0.02);
  EXPECT_NEAR(sum_f / 10000, 0.5, 0.02);
  // The top 53 (24) bits, scaled: the largest draw stays below 1.
  EXPECT_LT(static_cast<double>(~uint64_t{0} >> 11) * 0x1.0p-53, 1.0);
  EXPECT_LT(static_cast<float>(~uint64_t{0} >> 40) * 0x1.0p-24f, 1.0f);
}

TEST(Rng, BelowAndRangeCoverTheirIntervalEvenly) {
  Rng g(9, 0);
  std::vector<int> counts(6, 0);
  for (int i = 0; i < 60000; ++i) ++counts[g.below(6)];
  for (int c : counts) EXPECT_NEAR(c, 10000, 500);
  bool seen_lo = false, seen_hi = false;
  for (int i = 0; i < 1000; ++i) {
    const int64_t r = g.range(-3, 3);
    ASSERT_GE(r, -3);
    ASSERT_LE(r, 3);
    seen_lo |= r == -3;
    seen_hi |= r == 3;
  }
  EXPECT_TRUE(seen_lo && seen_hi);
  EXPECT_EQ(g.range(5, 5), 5);
  // n just above 2^63: plain modulo would land in the lower half twice as often.
  const uint64_t n = (uint64_t{1} << 63) + (uint64_t{1} << 62);
  int low = 0;
  for (int i = 0; i < 4000; ++i) low += g.below(n) < (uint64_t{1} << 62);
  EXPECT_NEAR(low, 4000 / 3, 150);
}

TEST(Rng, ShuffleIsAPermutationAndFisherYates) {
  std::vector<int> v(50);
  std::iota(v.begin(), v.end(), 0);
  Rng g(11, 0);
  g.shuffle(v);
  std::vector<int> sorted = v;
  std::sort(sorted.begin(), sorted.end());
  for (int i = 0; i < 50; ++i) ASSERT_EQ(sorted[i], i);
  // The same swaps by hand: position i - 1 with below(i), from the end.
  std::vector<int> w(50);
  std::iota(w.begin(), w.end(), 0);
  Rng h(11, 0);
  for (size_t i = w.size(); i > 1; --i) std::swap(w[i - 1], w[h.below(i)]);
  EXPECT_EQ(v, w);
}

TEST(NormalRng, Moments) {
  NormalRng rng(123, 456);
  const int n = 200000;
  double sum = 0, sum2 = 0, sum4 = 0;
  for (int i = 0; i < n; ++i) {
    double x = rng.next();
    sum += x;
    sum2 += x * x;
    sum4 += x * x * x * x;
  }
  EXPECT_NEAR(sum / n, 0.0, 0.01);
  EXPECT_NEAR(sum2 / n, 1.0, 0.02);
  EXPECT_NEAR(sum4 / n, 3.0, 0.1);  // the kurtosis of a normal
}

TEST(NormalRng, PortableLogMatchesLibm) {
  for (double x : {1e-300, 1e-10, 0.001, 0.3, 0.5, 0.7071, 0.9999999, 1.0, 1.5, 2.0, 1234.5}) {
    EXPECT_NEAR(portable_log(x), std::log(x), 4e-16 * std::max(1.0, std::abs(std::log(x)))) << x;
  }
}

TEST(Rng, OsEntropyDiffers) {
  EXPECT_NE(os_entropy(), os_entropy());  // 2^-64 to fail by chance
}

}  // namespace
}  // namespace stoa
