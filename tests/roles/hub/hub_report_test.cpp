// The hub's reports on their own (roles/hub/observe/hub_report.h): counters, /v1/status and
// /metrics built from a snapshot made by hand, with no hub: totals summed from their parts, the
// histograms cumulative, the verification warning, hostile worker names kept inside their
// label, and a history point made only of live workers.
#include "roles/hub/observe/hub_report.h"

#include <gtest/gtest.h>

#include <string>

namespace stoa::hub {
namespace {

HubSnapshot sample_snapshot() {
  HubSnapshot s;
  s.counters.accepted = 4;
  s.counters.reward_sum = 3;
  s.counters.rejected = {{"bad_logprob", 2}, {"too_long", 1}};
  s.counters.dropped = {{"invalid_rollout", 1}};
  s.counters.rate_limited = {{"join (this address)", 5}, {"lease (this worker)", 2}};
  s.counters.step_seconds_buckets.assign(s.counters.step_seconds_buckets.size(), 0);
  s.counters.step_seconds_buckets[0] = 1;  // <= 0.1 s
  s.counters.step_seconds_buckets[3] = 2;  // <= 1 s
  s.counters.start_ms = 1000;
  s.now_ms = 11'000;
  s.latest_version = 7;
  s.step = 6;
  s.workers_total = 1;
  WorkerStats w;
  w.id = "w-1";
  w.name = "evil\"} 1\nstoa_fake 9";
  w.version = 5;
  w.tokens_per_s = 12.5;
  w.last_seen_ms = 10'000;
  s.workers.push_back(w);
  return s;
}

TEST(HubReport, CounterTotalsAreTheSumOfTheirParts) {
  const auto m = counter_map(sample_snapshot());
  EXPECT_EQ(m.at("rollouts_rejected"), 3);
  EXPECT_EQ(m.at("rollouts_rejected_bad_logprob"), 2);
  EXPECT_EQ(m.at("groups_dropped"), 1);
  EXPECT_EQ(m.at("groups_dropped_invalid_rollout"), 1);
  EXPECT_EQ(m.at("rate_limited"), 7);
  EXPECT_DOUBLE_EQ(m.at("reward_mean_accepted"), 0.75);
  EXPECT_EQ(counter_map(HubSnapshot{}).at("reward_mean_accepted"), 0);  // no division by zero
}

TEST(HubReport, StatusSaysWhenVerificationIsOffBeyondLoopback) {
  const HubSnapshot s = sample_snapshot();
  const auto local = status_json(s, ReportContext{"search", false, 10, {}});
  EXPECT_EQ(local["task"], "search");
  EXPECT_DOUBLE_EQ(local["uptime_s"].get<double>(), 10.0);
  EXPECT_FALSE(local["verification"]["enabled"].get<bool>());
  EXPECT_FALSE(local["verification"].contains("warning"));
  EXPECT_EQ(local["workers"][0]["patch_lag"], 2);
  EXPECT_EQ(local["verification"]["mode"], "off");
  const auto open = status_json(s, ReportContext{"search", true, 10, {}});
  EXPECT_TRUE(open["verification"].contains("warning"));
}

// Issue 51 item 3: the mode in force and what it guarantees, one line each, and a warning where
// a run beyond loopback is weaker than it looks.
TEST(HubReport, StatusStatesTheVerificationModeAndWhatItGuarantees) {
  HubSnapshot s = sample_snapshot();
  s.verification_on = true;
  VerifyPolicy sampled;  // the defaults: peer off, 5 %, the first 16
  const auto local = status_json(s, ReportContext{"search", false, 10, sampled})["verification"];
  EXPECT_EQ(local["mode"], "sampled");
  const std::string guarantee = local["guarantee"];
  EXPECT_NE(guarantee.find("first 16 rollouts and 5 %"), std::string::npos) << guarantee;
  EXPECT_NE(guarantee.find("about 19 forged rollouts trained per identity"), std::string::npos)
      << guarantee;
  EXPECT_EQ(guarantee.find('\n'), std::string::npos) << "one line";
  EXPECT_FALSE(local.contains("warning")) << "loopback: the operator's own workers";
  const auto open = status_json(s, ReportContext{"search", true, 10, sampled})["verification"];
  EXPECT_NE(open["warning"].get<std::string>().find("peer = true"), std::string::npos);

  VerifyPolicy peer;
  peer.peer = true;
  peer.train_on_timeout = true;  // peer checks drop an overdue group whatever this says
  const auto checked = status_json(s, ReportContext{"search", true, 10, peer})["verification"];
  EXPECT_EQ(checked["mode"], "peer");
  EXPECT_NE(checked["guarantee"].get<std::string>().find("every rollout is replayed"),
            std::string::npos);
  EXPECT_FALSE(checked.contains("warning"));

  VerifyPolicy all = sampled;
  all.fraction = 1.0;
  all.train_on_timeout = true;
  const auto every = status_json(s, ReportContext{"search", true, 10, all})["verification"];
  EXPECT_EQ(every["guarantee"], "every rollout is replayed by the hub before its group trains");
  EXPECT_NE(every["warning"].get<std::string>().find("train_on_timeout"), std::string::npos);
  EXPECT_EQ(every["warning"].get<std::string>().find("peer = true"), std::string::npos);
}

TEST(HubReport, MetricsKeepHostileNamesInsideTheirLabel) {
  const std::string text = metrics_text(sample_snapshot(), ReportContext{"search", false, 10, {}});
  // The name's quote and newline are escaped: no line of the page starts with the injected name.
  EXPECT_EQ(text.find("\nstoa_fake"), std::string::npos);
  EXPECT_NE(text.find("name=\"evil\\\"} 1\\nstoa_fake 9\"} 12.5"), std::string::npos) << text;
  EXPECT_NE(text.find("stoa_rollouts_rejected_total{reason=\"too_long\"} 1"), std::string::npos);
  EXPECT_NE(text.find("stoa_rate_limited_total 7"), std::string::npos);
  // The step histogram is cumulative: 1 under 0.1 s, 3 under 1 s and at +Inf.
  EXPECT_NE(text.find("stoa_step_seconds_histogram_bucket{le=\"0.1\"} 1"), std::string::npos);
  EXPECT_NE(text.find("stoa_step_seconds_histogram_bucket{le=\"1\"} 3"), std::string::npos);
  EXPECT_NE(text.find("stoa_step_seconds_histogram_bucket{le=\"+Inf\"} 3"), std::string::npos);
  EXPECT_NE(text.find("stoa_rollouts_verified_total{result=\"pass\"} 0"), std::string::npos);
}

TEST(HubReport, MetricsCountVerdictsByTarget) {
  HubSnapshot s = sample_snapshot();
  s.verification_on = true;
  s.verified_pass = 5;
  s.verified_fail = 1;
  s.quarantined = 1;
  s.verified_by_target = {{"avx2", {4, 1}}, {"neon", {1, 0}}};
  s.verification = {{"rollouts_verified", 6}, {"verification_failures", 1}};
  const std::string text = metrics_text(s, ReportContext{"search", true, 10, {}});
  EXPECT_NE(text.find("stoa_rollouts_verified_total{result=\"fail\"} 1"), std::string::npos);
  EXPECT_NE(text.find("stoa_workers_quarantined 1"), std::string::npos);
  EXPECT_NE(text.find("{target=\"avx2\",result=\"fail\"} 1"), std::string::npos);
  EXPECT_NE(text.find("{target=\"neon\",result=\"pass\"} 1"), std::string::npos);
  VerifyPolicy peer;
  peer.peer = true;  // the default beyond loopback: nothing to warn of
  const auto st = status_json(s, ReportContext{"search", true, 10, peer});
  EXPECT_EQ(st["verification"]["by_target"]["avx2"]["fail"], 1);
  EXPECT_FALSE(st["verification"].contains("warning"));
}

TEST(HubReport, StepPointAveragesOnlyLiveWorkers) {
  std::map<std::string, WorkerStats> workers;
  workers["a"].last_seen_ms = 100'000;
  workers["a"].tokens_per_s = 10;
  workers["a"].idle_fraction = 0.5;
  workers["a"].version = 8;
  workers["b"].last_seen_ms = 1'000;  // silent for 99 s: not in the fleet figures
  workers["b"].tokens_per_s = 1000;
  StepReport report;
  report.step = 3;
  report.reward_mean = 0.25;
  const StepPoint p = step_point(report, 100'000, 0, 10, workers);
  EXPECT_EQ(p.step, 3);
  EXPECT_EQ(p.workers, 1);
  EXPECT_DOUBLE_EQ(p.fleet_tokens_per_s, 10);
  EXPECT_DOUBLE_EQ(p.worker_idle_fraction, 0.5);
  EXPECT_DOUBLE_EQ(p.patch_lag_mean, 2);
  EXPECT_DOUBLE_EQ(p.t_s, 100);
}

}  // namespace
}  // namespace stoa::hub
