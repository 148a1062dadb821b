// Our own elementary functions (kernels/fixed_math.h) against libm in double: they replace libm
// so that results do not depend on the machine, and must be as accurate as its double results
// (a few units in the last place), so that their f32 roundings agree with the old ones.
#include "kernels/fixed_math.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

namespace stoa::kernels {
namespace {

constexpr int kSamples = 200000;

TEST(FixedMath, ExpAndLogWithinAFewUlp) {
  std::mt19937_64 rng(1);
  std::uniform_real_distribution<double> x_dist(-700, 700);
  double worst_exp = 0, worst_log = 0;
  for (int i = 0; i < kSamples; ++i) {
    const double x = x_dist(rng);
    worst_exp = std::max(worst_exp, std::fabs(fixed_exp(x) - std::exp(x)) / std::exp(x));
    const double y = std::exp(x_dist(rng));
    const double want = std::log(y);
    worst_log = std::max(worst_log, std::fabs(fixed_log(y) - want) / std::fabs(want));
  }
  EXPECT_LT(worst_exp, 1e-15);
  EXPECT_LT(worst_log, 1e-15);
  EXPECT_EQ(fixed_exp(0.0), 1.0);
  EXPECT_EQ(fixed_log(1.0), 0.0);
  EXPECT_EQ(fixed_exp(-1000.0), 0.0);
  EXPECT_EQ(fixed_exp(1000.0), std::numeric_limits<double>::infinity());
  EXPECT_EQ(fixed_log(0.0), -std::numeric_limits<double>::infinity());
  EXPECT_TRUE(std::isnan(fixed_log(-1.0)));
  EXPECT_NEAR(fixed_log(4.9e-324), std::log(4.9e-324), 1e-12);  // subnormal input
}

TEST(FixedMath, SinCosAndPowAsRopeUsesThem) {
  std::mt19937_64 rng(2);
  std::uniform_real_distribution<double> angle_dist(0, 70000);  // positions x inv_freq <= 1
  double worst = 0;
  int f32_mismatches = 0;
  for (int i = 0; i < kSamples; ++i) {
    const double a = angle_dist(rng);
    double s = 0, c = 0;
    fixed_sincos(a, &s, &c);
    worst = std::max({worst, std::fabs(s - std::sin(a)), std::fabs(c - std::cos(a))});
    f32_mismatches += static_cast<float>(s) != static_cast<float>(std::sin(a));
  }
  EXPECT_LT(worst, 1e-15);
  EXPECT_LE(f32_mismatches, kSamples / 10000);
  double worst_pow = 0;
  for (double theta : {10000.0, 1000000.0}) {
    for (int i = 0; i < 64; ++i) {
      const double e = -2.0 * i / 128.0;
      worst_pow = std::max(
          worst_pow, std::fabs(fixed_pow(theta, e) - std::pow(theta, e)) / std::pow(theta, e));
    }
  }
  EXPECT_LT(worst_pow, 4e-15);
}

}  // namespace
}  // namespace stoa::kernels
