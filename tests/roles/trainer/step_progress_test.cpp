// roles/trainer/step_progress: "step N of M" with the time left from this process's pace, "step
// N" without a budget, spaced lines, the last step always said.
#include "roles/trainer/step_progress.h"

#include <gtest/gtest.h>

namespace stoa::trainer {
namespace {

using namespace std::chrono_literals;
using Clock = StepProgress::Clock;

TEST(StepProgress, StepOfMaxWithTheTimeLeft) {
  const Clock::time_point t0{};
  // Resumed after step 10 of 100; 5 s a step in this process.
  StepProgress p(100, 10, t0, 0ms);
  EXPECT_EQ(*p.line(11, 0.25, 5.0, t0 + 5s),
            "step 11 of 100 (11%), about 7 min left (reward 0.2500, 5.0 s)");
  EXPECT_EQ(*p.line(40, 0.5, 5.0, t0 + 150s),
            "step 40 of 100 (40%), about 5 min left (reward 0.5000, 5.0 s)");
  EXPECT_EQ(*p.line(100, 0.5, 5.0, t0 + 450s),
            "step 100 of 100 (100%), done (reward 0.5000, 5.0 s)");
}

TEST(StepProgress, NoBudgetSaysTheStepOnly) {
  StepProgress p(0, 0, Clock::time_point{}, 0ms);
  EXPECT_EQ(*p.line(3, 1.0, 0.5, Clock::time_point{} + 2s), "step 3 (reward 1.0000, 0.5 s)");
}

TEST(StepProgress, LinesAreSpacedButTheLastIsAlwaysSaid) {
  const Clock::time_point t0{};
  StepProgress p(5, 0, t0, 10s);
  EXPECT_TRUE(p.line(1, 0, 1, t0 + 1s));
  EXPECT_FALSE(p.line(2, 0, 1, t0 + 2s));
  EXPECT_TRUE(p.line(3, 0, 1, t0 + 12s));
  EXPECT_TRUE(p.line(5, 0, 1, t0 + 13s));
}

TEST(StepProgress, DurationsReadAsAPersonWouldSayThem) {
  EXPECT_EQ(format_duration(42), "42 s");
  EXPECT_EQ(format_duration(12 * 60 + 10), "12 min");
  EXPECT_EQ(format_duration(3 * 3600 + 5 * 60), "3 h 05 min");
  EXPECT_EQ(format_duration(-1), "0 s");
}

}  // namespace
}  // namespace stoa::trainer
