// The shared generator against the published algorithms (splitmix64's known outputs from state 0,
// xoshiro256** stepped by an independent transcription of the reference C code), and the
// properties the three users rely on: determinism and the [0, 1) range of uniform().
#include "core/xoshiro256.h"

#include <gtest/gtest.h>

namespace stoa {
namespace {

TEST(Xoshiro256, SplitmixKnownAnswers) {
  uint64_t x = 0;
  EXPECT_EQ(splitmix64(&x), 0xe220a8397b1dcdafull);
  EXPECT_EQ(splitmix64(&x), 0x6e789e6aa1b965f4ull);
  EXPECT_EQ(splitmix64(&x), 0x06c45d188009454full);
  EXPECT_EQ(splitmix64(&x), 0xf88bb8a8724c81ecull);
}

TEST(Xoshiro256, StarStarKnownAnswers) {
  Xoshiro256StarStar g = Xoshiro256StarStar::seeded_by_splitmix(0);
  EXPECT_EQ(g.state()[0], 0xe220a8397b1dcdafull);
  EXPECT_EQ(g.state()[3], 0xf88bb8a8724c81ecull);
  EXPECT_EQ(g.next(), 0x99ec5f36cb75f2b4ull);
  EXPECT_EQ(g.next(), 0xbf6e1f784956452aull);
  EXPECT_EQ(g.next(), 0x1a5f849d4933e6e0ull);
}

TEST(Xoshiro256, DeterministicAndUniformInRange) {
  Xoshiro256StarStar a = Xoshiro256StarStar::seeded_by_splitmix(42);
  Xoshiro256StarStar b = Xoshiro256StarStar::seeded_by_splitmix(42);
  double sum = 0;
  for (int i = 0; i < 10000; ++i) {
    const double u = a.uniform();
    ASSERT_EQ(u, b.uniform());
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    sum += u;
  }
  EXPECT_NEAR(sum / 10000, 0.5, 0.02);
}

}  // namespace
}  // namespace stoa
