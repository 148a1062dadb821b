// The trainer's step log (roles/trainer/step_log.h): the line format TrainerLoop writes, lenient
// reading of older or torn logs, and the one summary the demo report, plots and fleet bench use.
#include "roles/trainer/step_log.h"

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>

#include <gtest/gtest.h>

#include "core/error.h"

namespace stoa::trainer {
namespace {

StepRecord sample_record() {
  StepRecord r;
  r.step = 7;
  r.version = 8;
  r.trainer_step = 7;
  r.groups = 4;
  r.groups_dropped_stale = 1;
  r.groups_uniform = 2;
  r.staleness_histogram = {{0, 3}, {2, 1}};
  r.reward_mean = 0.375;
  r.loss = -0.25;
  r.lr = 1e-4;
  r.sequences = 16;
  r.tokens = 900;
  r.tokens_total = 2400;
  r.masked_fraction = 0.01;
  r.masked_fraction_pos = 0.02;
  r.masked_fraction_neg = 0.005;
  r.tv_mean = 0.03;
  r.tv_max = 0.5;
  r.kl_mean = 0.002;
  r.kl_max = 0.1;
  r.entropy = 1.5;
  r.grad_norm = 0.75;
  r.step_seconds = 2.5;
  r.busy_fraction = 0.8;
  r.patch_bytes = 123456;
  r.anchor_bytes = 0;
  r.unix_ms = int64_t{1'800'000'000'123};
  r.elapsed_s = 42.5;
  return r;
}

TEST(StepLog, TheLineIsByteForByteTheLiteralTrainerLoopWroteBefore) {
  const StepRecord r = sample_record();
  // The JSON literal TrainerLoop::log_step built before StepRecord existed, with the types its
  // sources had (unsigned version, size_t counts, a uint64-keyed histogram).
  nlohmann::json hist = nlohmann::json::object();
  for (const auto& [k, v] : std::map<uint64_t, int64_t>{{0, 3}, {2, 1}})
    hist[std::to_string(k)] = v;
  const nlohmann::json before = {{"step", int64_t{7}},
                                 {"version", uint64_t{8}},
                                 {"trainer_step", int64_t{7}},
                                 {"groups", size_t{4}},
                                 {"groups_dropped_stale", size_t{1}},
                                 {"groups_uniform", size_t{2}},
                                 {"staleness_histogram", hist},
                                 {"reward_mean", 0.375},
                                 {"loss", -0.25},
                                 {"lr", 1e-4},
                                 {"sequences", int64_t{16}},
                                 {"tokens", int64_t{900}},
                                 {"tokens_total", int64_t{2400}},
                                 {"masked_fraction", 0.01},
                                 {"masked_fraction_pos", 0.02},
                                 {"masked_fraction_neg", 0.005},
                                 {"tv_mean", 0.03},
                                 {"tv_max", 0.5},
                                 {"kl_mean", 0.002},
                                 {"kl_max", 0.1},
                                 {"entropy", 1.5},
                                 {"grad_norm", 0.75},
                                 {"step_seconds", 2.5},
                                 {"busy_fraction", 0.8},
                                 {"patch_bytes", uint64_t{123456}},
                                 {"anchor_bytes", uint64_t{0}},
                                 {"unix_ms", int64_t{1'800'000'000'123}},
                                 {"elapsed_s", 42.5}};
  EXPECT_EQ(nlohmann::json(r).dump(), before.dump());
  std::set<std::string> keys;
  const nlohmann::json written = r;
  for (const auto& [k, v] : written.items()) keys.insert(k);
  EXPECT_EQ(keys.size(), 28u);
}

TEST(StepLog, RoundTripsThroughJson) {
  const StepRecord r = sample_record();
  const StepRecord back = nlohmann::json::parse(nlohmann::json(r).dump()).get<StepRecord>();
  EXPECT_EQ(nlohmann::json(back), nlohmann::json(r));
  EXPECT_EQ(back.staleness_histogram, r.staleness_histogram);
  EXPECT_EQ(back.unix_ms, r.unix_ms);
}

TEST(StepLog, AnOlderLineReadsWithAbsentMetricsAsNaN) {
  std::string why;
  auto r = step_record_from_json(nlohmann::json::parse(R"({"step": 3, "loss": null})"), &why);
  ASSERT_TRUE(r) << why;
  EXPECT_EQ(r->step, 3);
  EXPECT_EQ(r->version, -1);
  EXPECT_TRUE(std::isnan(r->loss));
  EXPECT_TRUE(std::isnan(r->busy_fraction));
  EXPECT_FALSE(r->unix_ms.has_value());
  EXPECT_EQ(r->tokens, 0);
  EXPECT_FALSE(step_record_from_json(nlohmann::json::parse(R"({"version": 3})"), &why));
  EXPECT_EQ(why, "no integer \"step\"");
  EXPECT_THROW(nlohmann::json::parse("[1]").get<StepRecord>(), Error);
}

TEST(StepLog, BusyFractionIsTimeWeightedNotAMeanOfRatios) {
  StepRecord short_step, long_step;
  short_step.step_seconds = 1;  // 1 s of compute after 1 s of waiting: wall 2 s
  short_step.busy_fraction = 0.5;
  long_step.step_seconds = 9;  // 9 s of compute after 1 s of waiting: wall 10 s
  long_step.busy_fraction = 0.9;
  const StepSummary s = summarize_steps({short_step, long_step});
  EXPECT_DOUBLE_EQ(step_wall_seconds(short_step), 2.0);
  EXPECT_DOUBLE_EQ(s.compute_seconds, 10.0);
  EXPECT_DOUBLE_EQ(s.wall_seconds, 12.0);
  EXPECT_DOUBLE_EQ(s.busy_fraction, 10.0 / 12.0);  // the mean of the ratios would be 0.7
  EXPECT_DOUBLE_EQ(s.step_seconds_mean, 5.0);
  EXPECT_TRUE(std::isnan(summarize_steps({}).busy_fraction));
}

TEST(StepLog, ReadingSkipsAndCountsUnusableLines) {
  const auto path = std::filesystem::temp_directory_path() /
                    ("stoa-step-log-" + std::to_string(::getpid()) + ".jsonl");
  {
    std::ofstream f(path);
    f << nlohmann::json(sample_record()).dump() << "\n\nnot json\n"
      << R"({"step": 8, "tokens": 100})"
      << "\n{\"step\": 9, \"tok";  // torn: no newline yet
  }
  const StepLog log = read_step_log(path.string());
  std::filesystem::remove(path);
  ASSERT_EQ(log.records.size(), 2u);
  EXPECT_EQ(log.records[1].step, 8);
  EXPECT_EQ(log.lines, 4);
  EXPECT_EQ(log.skipped, 2);
  ASSERT_EQ(log.warnings.size(), 2u);
  EXPECT_NE(log.warnings[0].find(":3: not a JSON object"), std::string::npos) << log.warnings[0];
  EXPECT_TRUE(read_step_log(path.string(), /*missing_ok=*/true).records.empty());
  EXPECT_THROW(read_step_log(path.string()), Error);
}

}  // namespace
}  // namespace stoa::trainer
