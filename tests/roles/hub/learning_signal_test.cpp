// Steps without learning signal (roles/hub/observe/learning_signal.h): which steps count, the
// streak and its warning (raised at N in a row, repeated every N, cleared by one step with
// signal), and how /v1/status, /metrics and the history point report them.
#include "roles/hub/observe/learning_signal.h"

#include <gtest/gtest.h>

#include "roles/hub/observe/hub_report.h"

namespace stoa::hub {
namespace {

StepReport report(int64_t groups, int64_t uniform, double grad_norm) {
  StepReport r;
  r.step = 1;
  r.groups = groups;
  r.groups_uniform = uniform;
  r.extra["grad_norm"] = grad_norm;
  return r;
}

TEST(LearningSignal, AStepWithoutSignalIsAllGroupsUniformOrAZeroGradient) {
  EXPECT_TRUE(step_without_signal(report(4, 4, 0.0)));
  EXPECT_TRUE(step_without_signal(report(4, 1, 0.0)));    // e.g. every token masked
  EXPECT_FALSE(step_without_signal(report(4, 3, 1e-9)));  // a small step is still a step
  StepReport old = report(2, 2, 0.0);
  old.extra.clear();  // a report without the gradient norm: judged by its groups
  EXPECT_TRUE(step_without_signal(old));
  old.groups_uniform = 1;
  EXPECT_FALSE(step_without_signal(old));
}

TEST(LearningSignal, WarnsAtNInARowRemindsEveryNAndClearsOnSignal) {
  LearningSignalWatch watch(3);
  EXPECT_FALSE(watch.add(report(2, 2, 0)));
  EXPECT_FALSE(watch.add(report(2, 2, 0)));
  EXPECT_FALSE(watch.warning());
  EXPECT_EQ(watch.warning_text(), "");
  EXPECT_TRUE(watch.add(report(2, 2, 0)));  // the third in a row raises it
  EXPECT_TRUE(watch.warning());
  EXPECT_NE(watch.warning_text().find("no learning signal for the last 3"), std::string::npos);
  EXPECT_FALSE(watch.add(report(2, 2, 0)));
  EXPECT_FALSE(watch.add(report(2, 2, 0)));
  EXPECT_TRUE(watch.add(report(2, 2, 0)));  // a reminder at 6, not a line every step
  EXPECT_FALSE(watch.add(report(2, 1, 0.5)));
  EXPECT_FALSE(watch.warning());
  EXPECT_EQ(watch.streak(), 0);
  EXPECT_EQ(watch.steps(), 7);
  EXPECT_EQ(watch.steps_without_signal(), 6);
  EXPECT_EQ(watch.groups(), 14);
  EXPECT_EQ(watch.groups_uniform(), 13);

  LearningSignalWatch never(0);
  for (int i = 0; i < 20; ++i) EXPECT_FALSE(never.add(report(1, 1, 0)));
  EXPECT_FALSE(never.warning());
  EXPECT_EQ(never.steps_without_signal(), 20);
}

TEST(LearningSignal, StatusMetricsAndHistorySayWhenNothingIsLearned) {
  HubSnapshot s;
  s.counters.learning_signal = LearningSignalWatch(2);
  s.counters.learning_signal.add(report(4, 4, 0));
  const ReportContext context{"my-task", false, 10, {}};
  auto quiet = status_json(s, context)["learning_signal"];
  EXPECT_EQ(quiet["steps_without_signal"], 1);
  EXPECT_EQ(quiet["consecutive_steps_without_signal"], 1);
  EXPECT_EQ(quiet["warn_after_steps"], 2);
  EXPECT_FALSE(quiet.contains("warning"));
  EXPECT_NE(metrics_text(s, context).find("stoa_no_learning_signal 0\n"), std::string::npos);

  s.counters.learning_signal.add(report(4, 4, 0));
  const auto status = status_json(s, context);
  EXPECT_TRUE(status["learning_signal"].contains("warning"));
  EXPECT_EQ(status["learning_signal"]["groups_uniform"], 8);
  EXPECT_EQ(status["counters"]["steps_without_signal"], 2);
  const std::string metrics = metrics_text(s, context);
  for (const char* line :
       {"stoa_no_learning_signal 1\n", "stoa_steps_without_signal_total 2\n",
        "stoa_steps_without_signal_consecutive 2\n", "stoa_groups_uniform_total 8\n",
        "# TYPE stoa_groups_uniform_total counter\n"})
    EXPECT_NE(metrics.find(line), std::string::npos) << line << metrics;

  const StepPoint uniform = step_point(report(4, 4, 0), 0, 0, std::nullopt, {});
  EXPECT_TRUE(uniform.no_signal);
  EXPECT_DOUBLE_EQ(uniform.uniform_fraction, 1.0);
  const StepPoint mixed = step_point(report(4, 1, 0.3), 0, 0, std::nullopt, {});
  EXPECT_FALSE(mixed.no_signal);
  EXPECT_DOUBLE_EQ(mixed.uniform_fraction, 0.25);
}

}  // namespace
}  // namespace stoa::hub
