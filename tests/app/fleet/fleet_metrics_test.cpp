// The fleet bench's measurement arithmetic on hand-written logs: timestamps, switches, the final
// idle fraction, sync latencies with skipped and unreached versions, percentiles, and the
// trainer's time-weighted busy fraction.
#include <gtest/gtest.h>

#include <cmath>

#include "app/fleet/fleet_metrics.h"

namespace stoa::app::fleet {
namespace {

TEST(FleetMetrics, ParsesTheLogStamp) {
  const auto t = parse_log_time("1970-01-01T00:00:01.250Z I [worker] x");
  ASSERT_TRUE(t);
  EXPECT_EQ(*t, 1250);
  EXPECT_EQ(*parse_log_time("2026-11-30T08:00:00.123Z W [sync] y"), 1796025600123);
  EXPECT_FALSE(parse_log_time("stoa run: hub at http://127.0.0.1:1"));
  EXPECT_FALSE(parse_log_time(""));
}

TEST(FleetMetrics, ReadsSwitchesAndTheStoppedLine) {
  const std::string log =
      "1970-01-01T00:00:01.000Z I [worker] w0 joined as w-1\n"
      "1970-01-01T00:00:02.000Z I [worker] generating with version 0 (anchor)\n"
      "garbage line\n"
      "1970-01-01T00:00:03.000Z W [sync] route to version 3 refused: x; catching up\n"
      "1970-01-01T00:00:05.500Z I [worker] generating with version 3\n"
      "1970-01-01T00:00:09.000Z I [worker] stopped: 12 rollouts (11 accepted, 0 duplicate, 1 "
      "rejected, 0 left in the spool), 3456 tokens, 2 weight switches, idle 0.25\n";
  const WorkerLog w = parse_worker_log(log);
  ASSERT_EQ(w.switches.size(), 2u);
  EXPECT_EQ(w.switches[0].version, 0u);
  EXPECT_EQ(w.switches[0].unix_ms, 2000);
  EXPECT_EQ(w.switches[1].version, 3u);
  EXPECT_EQ(w.switches[1].unix_ms, 5500);
  ASSERT_TRUE(w.idle);
  EXPECT_DOUBLE_EQ(*w.idle, 0.25);
  EXPECT_EQ(w.rollouts.value_or(0), 12u);
  EXPECT_EQ(w.tokens.value_or(0), 3456u);
  EXPECT_EQ(w.warnings, 1);
  EXPECT_FALSE(parse_worker_log("no stop line\n").idle);
}

TEST(FleetMetrics, SyncLatencyCountsSkippedAndUnreachedVersions) {
  // Versions 1, 2, 3 published at 1000, 2000, 3000 ms.
  const std::map<uint64_t, int64_t> publish = {{1, 1000}, {2, 2000}, {3, 3000}};
  // Worker A switches to 1 at 1100 and straight to 3 at 3500 (2 skipped: fresh for it at 3500).
  // Worker B reaches 1 at 1300 and nothing after before the window ends at 4000.
  // Both got their first weights (version 0) before any of these were published.
  const std::vector<std::vector<Switch>> workers = {{{500, 0}, {1100, 1}, {3500, 3}},
                                                    {{600, 0}, {1300, 1}, {4500, 3}}};
  const SyncLatencies s = sync_latencies(publish, workers, 4000);
  std::vector<double> ms = s.ms;
  std::sort(ms.begin(), ms.end());
  EXPECT_EQ(ms, (std::vector<double>{100, 300, 500, 1500}));
  EXPECT_EQ(s.skipped, 1);
  EXPECT_EQ(s.unsynced, 2) << "B never reached 2 or 3 inside the window";
}

TEST(FleetMetrics, VersionsBeforeAWorkersFirstWeightsAreItsColdStart) {
  const std::map<uint64_t, int64_t> publish = {{1, 1000}, {2, 3000}};
  // The worker got its first weights (version 1) at 1500: that is its cold start, not a sync
  // latency of version 1; version 2 then took 600 ms.
  const SyncLatencies s = sync_latencies(publish, {{{1500, 1}, {3600, 2}}}, 4000);
  EXPECT_EQ(s.ms, (std::vector<double>{600}));
  EXPECT_EQ(s.skipped, 0);
  EXPECT_EQ(s.unsynced, 0);
  EXPECT_EQ(sync_latencies(publish, {{}}, 4000).unsynced, 2) << "a worker that never synced";
}

TEST(FleetMetrics, PercentilesInterpolate) {
  EXPECT_TRUE(std::isnan(percentile({}, 50)));
  EXPECT_DOUBLE_EQ(percentile({5}, 95), 5);
  EXPECT_DOUBLE_EQ(percentile({1, 2, 3, 4}, 50), 2.5);
  EXPECT_DOUBLE_EQ(percentile({10, 0, 20}, 100), 20);
  EXPECT_NEAR(percentile({0, 100}, 95), 95, 1e-9);
}

TEST(FleetMetrics, TrainerBusyIsTimeWeighted) {
  // Step 1: 1 s compute, busy 0.5 (1 s waiting). Step 2: 3 s compute, busy 1.0.
  // Time-weighted: 4 / 5 = 0.8 (a mean of ratios would say 0.75).
  const std::string jsonl =
      R"({"step":1,"step_seconds":1.0,"busy_fraction":0.5,"patch_bytes":0,"anchor_bytes":9000})"
      "\n"
      R"({"step":2,"step_seconds":3.0,"busy_fraction":1.0,"patch_bytes":100,"anchor_bytes":0})"
      "\n{\"step\":3,\"step_se";  // torn last line
  const TrainerSummary s = summarize_steps(jsonl);
  EXPECT_EQ(s.steps, 2);
  EXPECT_DOUBLE_EQ(s.busy_fraction, 0.8);
  EXPECT_DOUBLE_EQ(s.step_seconds_mean, 2.0);
  EXPECT_EQ(s.anchors, 1);
  EXPECT_EQ(s.patches, 1);
  EXPECT_DOUBLE_EQ(s.anchor_bytes_mean, 9000);
  EXPECT_DOUBLE_EQ(s.patch_bytes_mean, 100);
}

}  // namespace
}  // namespace stoa::app::fleet
