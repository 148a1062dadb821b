#include "app/demo/demo_report.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "support/temp_dir.h"

namespace stoa::app {
namespace {

// summarize_step_log over a steps.jsonl holding `lines` (a scratch file, removed after).
nlohmann::json summary_of(const std::string& lines) {
  testing::TempDir dir("steps");
  std::ofstream(dir.file("steps.jsonl")) << lines;
  return summarize_step_log(dir.file("steps.jsonl"));
}

TEST(DemoReport, StepLogSummaryIsTokenWeightedAndSkipsBadLines) {
  std::ostringstream f;
  f << R"({"step":1,"version":1,"tokens":100,"masked_fraction":0.1,"tv_mean":0.01,"kl_mean":0.001,"step_seconds":2,"busy_fraction":0.5,"patch_bytes":0,"anchor_bytes":5000,"reward_mean":0.2,"groups_dropped_stale":1})"
    << "\nnot json\n"
    << R"({"step":2,"version":2,"tokens":300,"masked_fraction":0.0,"tv_mean":0.03,"kl_mean":0.003,"step_seconds":4,"busy_fraction":0.7,"patch_bytes":1000,"anchor_bytes":0,"reward_mean":0.6,"groups_dropped_stale":0})"
    << "\n";
  const nlohmann::json s = summary_of(f.str());
  EXPECT_EQ(s["steps"], 2);
  EXPECT_EQ(s["last_version"], 2);
  EXPECT_DOUBLE_EQ(s["dppo_masked_fraction"].get<double>(), 10.0 / 400.0);
  EXPECT_DOUBLE_EQ(s["tv_mean"].get<double>(), (1.0 + 9.0) / 400.0);
  EXPECT_DOUBLE_EQ(s["patch_bytes_mean"].get<double>(), 1000.0);  // anchors are not patches
  EXPECT_EQ(s["anchors"], 1.0);
  EXPECT_DOUBLE_EQ(s["anchor_bytes_mean"].get<double>(), 5000.0);
  EXPECT_DOUBLE_EQ(s["trainer_compute_seconds"].get<double>(), 6.0);
  // Time-weighted: compute / (compute / busy) summed over steps, not the mean of 0.5 and 0.7.
  EXPECT_DOUBLE_EQ(s["busy_fraction"].get<double>(), 6.0 / (2.0 / 0.5 + 4.0 / 0.7));
  EXPECT_DOUBLE_EQ(s["groups_dropped_stale"].get<double>(), 1.0);
  EXPECT_DOUBLE_EQ(s["reward_first_quarter"].get<double>(), 0.2);
  EXPECT_DOUBLE_EQ(s["reward_last_quarter"].get<double>(), 0.6);
}

TEST(DemoReport, RewardMarkIsTheFirstFullWindowAtTheLevel) {
  // A single step at 1.0 early does not make a window's mean; steps 9.. at 0.5 do once the
  // window holds enough of them.
  std::ostringstream f;
  for (size_t i = 1; i <= 24; ++i) {
    const double reward = i == 2 ? 1.0 : (i >= 9 ? 0.5 : 0.0);
    f << "{\"step\":" << i << ",\"version\":" << i << ",\"tokens\":10,\"reward_mean\":" << reward
      << ",\"tv_mean\":" << (i <= 6 ? 0.001 : 0.004) << ",\"elapsed_s\":" << 10.0 * i << "}\n";
  }
  const nlohmann::json s = summary_of(f.str());
  // Window mean ≥ 0.3 needs 0.5·k ≥ 2.4 → k = 5 steps at 0.5 in the window: steps 9..13 → step 13.
  EXPECT_DOUBLE_EQ(s["seconds_to_reward_level"].get<double>(), 130.0);
  EXPECT_DOUBLE_EQ(s["tv_first_quarter"].get<double>(), 0.001);
  EXPECT_DOUBLE_EQ(s["tv_last_quarter"].get<double>(), 0.004);
}

TEST(DemoReport, RewardMarkNeverReachedIsMinusOne) {
  std::ostringstream f;
  for (int i = 1; i <= 20; ++i)
    f << "{\"step\":" << i << ",\"version\":" << i
      << ",\"tokens\":10,\"reward_mean\":0.1,\"elapsed_s\":" << i << "}\n";
  const nlohmann::json s = summary_of(f.str());
  EXPECT_EQ(s["seconds_to_reward_level"].get<double>(), -1.0);
}

TEST(DemoReport, EarlierResultsCountOnlyFromTheSameWarmStartAndBudget) {
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("stoa-ablations-" + std::to_string(::getpid()) + ".json"))
                               .string();
  const nlohmann::json key = {{"warm_start", {{"sft", {{"epochs", 3}}}}}, {"minutes_per_run", 4}};
  std::ofstream(path)
      << nlohmann::json{{"comparability", key}, {"runs", {{{"variant", "ppo-clip"}}}}}.dump();
  const nlohmann::json same = read_comparable_results(path, key);
  ASSERT_TRUE(same.is_object());
  EXPECT_EQ(same["runs"][0]["variant"], "ppo-clip");
  nlohmann::json other_budget = key;
  other_budget["minutes_per_run"] = 5;
  EXPECT_TRUE(read_comparable_results(path, other_budget).is_null());
  std::ofstream(path) << "{ not json";
  EXPECT_TRUE(read_comparable_results(path, key).is_null());
  std::filesystem::remove(path);
  EXPECT_TRUE(read_comparable_results(path, key).is_null());
}

TEST(DemoReport, SftProgressLineNamesStepEpochLossAndLr) {
  const std::string line = sft_progress_line(
      nlohmann::json{{"step", 3600}, {"epoch", 1}, {"loss", 0.1875}, {"lr", 1.0e-3}});
  EXPECT_EQ(line, "sft: step 3600  epoch 1  loss 0.188  lr 1.00e-03");
}

TEST(DemoReport, MissingLogGivesAnEmptySummary) {
  const nlohmann::json s = summarize_step_log("/nonexistent/steps.jsonl");
  EXPECT_EQ(s["steps"], 0);
  EXPECT_EQ(s["dppo_masked_fraction"], 0.0);
}

TEST(DemoReport, ProgressLineNamesStepVersionRewardAndWorkers) {
  const auto st = nlohmann::json::parse(R"({
    "step": 7, "latest_version": 7, "counters": {"rollouts_accepted": 96},
    "last_step": {"reward_mean": 0.375, "masked_fraction": 0.002, "tv": 0.01, "busy_fraction": 0.8},
    "workers": [{"name": "w1", "tokens_per_s": 250.4, "patch_lag": 1}]})");
  const std::string line = rl_progress_line(st, 75);
  EXPECT_NE(line.find("1m15s"), std::string::npos) << line;
  EXPECT_NE(line.find("step 7"), std::string::npos) << line;
  EXPECT_NE(line.find("version 7"), std::string::npos) << line;
  EXPECT_NE(line.find("reward 0.375"), std::string::npos) << line;
  EXPECT_NE(line.find("w1=250tok/s(lag 1)"), std::string::npos) << line;
}

}  // namespace
}  // namespace stoa::app

namespace stoa::app {
namespace {

TEST(DemoReport, ValidationCostIsPerReplayedRolloutAgainstPerGeneratedRollout) {
  const nlohmann::json counters = {{"rollouts_accepted", 90.0},
                                   {"rollouts_rejected", 10.0},
                                   {"rollouts_verified", 50.0},
                                   {"verification_cpu_seconds", 2.5}};
  const nlohmann::json c = verification_cost(counters, 40.0);
  EXPECT_DOUBLE_EQ(c["generation_cpu_s"].get<double>(), 40.0);
  EXPECT_DOUBLE_EQ(c["generation_cpu_s_per_rollout"].get<double>(), 0.4);  // 40 / (90 + 10)
  EXPECT_DOUBLE_EQ(c["validation_cpu_s"].get<double>(), 2.5);
  EXPECT_DOUBLE_EQ(c["validation_cpu_s_per_rollout"].get<double>(), 0.05);  // 2.5 / 50
  EXPECT_DOUBLE_EQ(c["validation_cpu_fraction"].get<double>(), 0.125);
  // Nothing generated or replayed: zeros, never a division by zero.
  const nlohmann::json none = verification_cost(nlohmann::json::object(), 0.0);
  EXPECT_EQ(none["validation_cpu_fraction"].get<double>(), 0.0);
  EXPECT_EQ(none["generation_cpu_s_per_rollout"].get<double>(), 0.0);

  nlohmann::json summary = c;
  summary["rollouts_verified"] = 50.0;
  summary["verification_failures"] = 0.0;
  summary["workers_quarantined"] = 0.0;
  summary["rollouts_verified_by_target"] = {{"AVX2", {{"pass", 20}, {"fail", 0}}},
                                            {"AVX3_DL", {{"pass", 30}, {"fail", 0}}}};
  const std::string lines = verification_summary_lines(summary);
  EXPECT_NE(lines.find("50 rollouts replayed, 0 failed, 0 workers quarantined"), std::string::npos)
      << lines;
  EXPECT_NE(lines.find("AVX2 20/0 AVX3_DL 30/0"), std::string::npos) << lines;
  EXPECT_NE(lines.find("generation 40.0 CPU-s (0.4000 a rollout), validation 2.5 CPU-s (0.0500 a "
                       "replayed rollout): validation per rollout = 12.5 % of generation"),
            std::string::npos)
      << lines;
  EXPECT_EQ(verification_summary_lines(nlohmann::json::object()), "");
}

}  // namespace
}  // namespace stoa::app
