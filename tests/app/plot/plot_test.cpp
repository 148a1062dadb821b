#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include <gtest/gtest.h>

#include "app/plot/plot_data.h"
#include "app/plot/plot_fixture.h"
#include "app/plot/plot_gnuplot.h"
#include "app/plot/plot_script.h"
#include "core/error.h"
#include "support/file_text.h"
#include "support/stoa_cli.h"

namespace stoa::app::plot {
namespace {
namespace fs = std::filesystem;
using namespace testing;

TEST(PlotData, ParsesEveryFieldOfAStepLine) {
  std::string why;
  auto s = parse_step_line(step_json(10, 42.5).dump(), &why);
  ASSERT_TRUE(s) << why;
  EXPECT_EQ(s->step, 10);
  EXPECT_EQ(s->version, 10);
  EXPECT_DOUBLE_EQ(s->reward_mean, 0.4);
  EXPECT_DOUBLE_EQ(s->masked_fraction, 0.003);
  EXPECT_DOUBLE_EQ(s->masked_fraction_neg, 0.004);
  EXPECT_DOUBLE_EQ(s->tv_max, 0.2);
  EXPECT_DOUBLE_EQ(s->kl_mean, 0.001);
  EXPECT_DOUBLE_EQ(s->busy_fraction, 0.8);
  EXPECT_DOUBLE_EQ(s->patch_bytes, 41000);
  EXPECT_DOUBLE_EQ(s->anchor_bytes, 4000000);
  EXPECT_DOUBLE_EQ(s->elapsed_s, 42.5);
  EXPECT_EQ(s->staleness_histogram, (std::map<int64_t, int64_t>{{0, 2}, {1, 1}, {2, 0}}));
}

TEST(PlotData, AMissingMetricIsNaNNotAnError) {
  std::string why;
  auto s = parse_step_line(R"({"step": 3, "reward_mean": null})", &why);
  ASSERT_TRUE(s) << why;
  EXPECT_EQ(s->step, 3);
  EXPECT_TRUE(std::isnan(s->reward_mean));
  EXPECT_TRUE(std::isnan(s->elapsed_s));
  EXPECT_TRUE(s->staleness_histogram.empty());
}

TEST(PlotData, DemoDirectoryPlacesEvalsOnBothAxes) {
  TempDir t("demo");
  write_demo(t.path(), 12, 0.3, 0.6);
  write_file(t.path() / "logs" / "eval-step-5.json", eval_json(0.45));
  // A future demo may say where the eval was taken; that wins over the name.
  write_file(t.path() / "logs" / "eval-mid.json",
             R"({"split": "validation", "pass1": 0.5, "step": 8, "elapsed_s": 33.0})");
  write_file(t.path() / "logs" / "eval-test.json", eval_json(0.55, "test"));
  RunData r = load_run(t.path().string(), "");
  EXPECT_EQ(r.label, t.path().filename().string());
  ASSERT_EQ(r.steps.size(), 12u);
  EXPECT_EQ(r.lines_skipped, 0);
  EXPECT_EQ(r.clock, ClockSource::kElapsed);
  EXPECT_DOUBLE_EQ(r.steps.back().wall_s, 10.0 + 2.5 * 12);
  // eval-test.json (split "test", no step) is the final report, at the last step.
  ASSERT_EQ(r.evals.size(), 5u);
  EXPECT_EQ(r.evals[0].step, 0);
  EXPECT_DOUBLE_EQ(r.evals[0].wall_s, 0);
  EXPECT_DOUBLE_EQ(r.evals[0].pass1, 0.3);
  EXPECT_EQ(r.evals[1].step, 5);
  EXPECT_DOUBLE_EQ(r.evals[1].wall_s, r.steps[4].wall_s);
  EXPECT_EQ(r.evals[2].step, 8);
  EXPECT_DOUBLE_EQ(r.evals[2].wall_s, 33.0);
  for (const int i : {3, 4}) {
    EXPECT_EQ(r.evals[i].step, 12);
    EXPECT_DOUBLE_EQ(r.evals[i].wall_s, r.steps.back().wall_s);
  }
  // Sorted by step, stable in file-name order: eval-after before eval-test.
  EXPECT_DOUBLE_EQ(r.evals[3].pass1, 0.6);
  EXPECT_EQ(r.evals[4].split, "test");
  EXPECT_TRUE(r.warnings.empty());
  // The test split is not a point on the held-out curve.
  write_plot_inputs({r}, (t.path() / "out").string());
  const std::string evals =
      stoa::testing::read_text(t.path() / "out" / ("r1-" + r.label + ".evals.dat"));
  EXPECT_NE(evals.find(" 0.6 "), std::string::npos) << evals;
  EXPECT_EQ(evals.find(" 0.55 "), std::string::npos) << evals;
}

TEST(PlotData, RunDirectoryFindsEvalsBesideIt) {
  TempDir t("rundir");
  write_demo(t.path() / "demo", 4, 0.2, 0.4);
  RunData r = load_run((t.path() / "demo" / "run").string(), "mine");
  EXPECT_EQ(r.label, "mine");
  EXPECT_EQ(r.steps.size(), 4u);
  EXPECT_EQ(r.evals.size(), 2u);
  EXPECT_EQ(default_label((t.path() / "demo" / "run").string()), "demo");
  EXPECT_EQ(default_label((t.path() / "abl-tv/").string()), "abl-tv");
}

TEST(PlotData, AResumedLogContinuesTheWallClock) {
  TempDir t("resume");
  // The second process's elapsed_s restarts near zero: its steps go after the first's.
  write_file(t.path() / "steps.jsonl", steps_text(1, 5, 0.0) + steps_text(6, 8, 1.0));
  RunData r = load_run(t.path().string(), "");
  ASSERT_EQ(r.steps.size(), 8u);
  for (size_t i = 1; i < r.steps.size(); i++)
    EXPECT_GT(r.steps[i].wall_s, r.steps[i - 1].wall_s) << "step " << r.steps[i].step;
  EXPECT_DOUBLE_EQ(r.steps[5].wall_s, 12.5 + 3.5);
}

TEST(PlotData, WallClockFallsBackToUnixMsThenToAnEstimate) {
  TempDir t("clock");
  std::string unix_only;
  for (int s = 1; s <= 3; s++) {
    auto j = step_json(s, 4.0 * s);
    j.erase("elapsed_s");
    unix_only += j.dump() + "\n";
  }
  write_file(t.path() / "a" / "steps.jsonl", unix_only);
  RunData a = load_run((t.path() / "a").string(), "");
  EXPECT_EQ(a.clock, ClockSource::kUnixMs);
  // The first step began step_seconds (2 s) before it was logged.
  EXPECT_NEAR(a.steps[0].wall_s, 2.0, 1e-6);
  EXPECT_NEAR(a.steps[2].wall_s, 10.0, 1e-6);

  write_file(t.path() / "b" / "steps.jsonl", steps_text(1, 3, 0.0, /*wall_clock=*/false));
  RunData b = load_run((t.path() / "b").string(), "");
  EXPECT_EQ(b.clock, ClockSource::kEstimated);
  EXPECT_NEAR(b.steps[2].wall_s, 3 * 2.0 / 0.8, 1e-9);  // step_seconds / busy_fraction
}

TEST(PlotScript, QuotesLabelsAndSlugsFileNames) {
  EXPECT_EQ(gnuplot_quote("it's"), "'it''s'");
  EXPECT_EQ(gnuplot_quote("a\\b_c"), "'a\\b_c'");
  EXPECT_EQ(file_slug(0, "binary tv/κ"), "r1-binary_tv___");
  EXPECT_EQ(file_slug(2, "x"), "r3-x");
}

TEST(PlotScript, WritesDataAndScriptForEveryChart) {
  TempDir t("script");
  write_demo(t.path() / "d", 6, 0.3, 0.5);
  RunData r = load_run((t.path() / "d").string(), "");
  PlotFiles f = write_plot_inputs({r}, (t.path() / "out").string());
  EXPECT_EQ(f.charts.size(), 9u);  // pass@1 x2, reward x2, masked, tv/kl, staleness, patch, busy
  const std::string steps = stoa::testing::read_text(t.path() / "out" / "r1-d.steps.dat");
  // Step 1: no anchor (NaN on the log axis), patch of 40100 bytes.
  EXPECT_NE(
      steps.find("\n1 1 12.5 0.31 0.31 0.003 0.002 0.004 0.01 0.2 0.001 0.05 0.8 2 40100 NaN\n"),
      std::string::npos)
      << steps;
  const std::string stale = stoa::testing::read_text(t.path() / "out" / "staleness.dat");
  // 6 steps x (2 + 1 + step%2) groups = 21; 12 at staleness 0.
  EXPECT_NE(stale.find("\n0 0.571428571\n"), std::string::npos) << stale;
  const std::string evals = stoa::testing::read_text(t.path() / "out" / "r1-d.evals.dat");
  EXPECT_NE(evals.find("\n0 0 0.3 "), std::string::npos) << evals;
  EXPECT_NE(evals.find("\n6 25 0.5 "), std::string::npos) << evals;

  // Without evals there is no pass@1 chart to draw.
  TempDir u("noeval");
  write_file(u.path() / "steps.jsonl", steps_text(1, 3, 0.0));
  PlotFiles g = write_plot_inputs({load_run(u.path().string(), "")}, (u.path() / "o").string());
  EXPECT_EQ(g.charts.size(), 7u);
  for (const auto& c : g.charts) EXPECT_EQ(c.find("pass1"), std::string::npos) << c;
}

TEST(PlotRender, GnuplotDrawsEveryChartForSeveralRuns) {
  if (find_executable("gnuplot").empty()) GTEST_SKIP() << "gnuplot is not installed";
  TempDir t("render");
  write_demo(t.path() / "tv", 20, 0.3, 0.62);
  write_demo(t.path() / "kl", 15, 0.3, 0.55);
  std::vector<RunData> runs = {load_run((t.path() / "tv").string(), "binary_tv 'A'"),
                               load_run((t.path() / "kl").string(), "")};
  PlotFiles f = write_plot_inputs(runs, (t.path() / "out").string());
  const std::string log = run_gnuplot("gnuplot", f.script);
  EXPECT_TRUE(fs::exists(log));
  ASSERT_EQ(f.charts.size(), 9u);
  for (const auto& png : f.charts) {
    EXPECT_TRUE(is_png(png)) << png << "\n" << stoa::testing::read_text(log);
    EXPECT_GT(fs::file_size(png), 2000u) << png;  // an image with content, not an empty canvas
  }
  const std::string script = stoa::testing::read_text(f.script);
  EXPECT_NE(script.find("'binary_tv ''A'''"), std::string::npos);
  EXPECT_NE(script.find("'kl'"), std::string::npos);
}

// `stoa plot` end to end, when this build has the binary (it is built with the tests).
TEST(PlotCommand, PrintsTheFilesItWrote) {
  const char* bin = std::getenv("STOA_BINARY");
  if (!bin || !fs::exists(bin)) GTEST_SKIP() << "no stoa binary in this build";
  if (find_executable("gnuplot").empty()) GTEST_SKIP() << "gnuplot is not installed";
  TempDir t("cmd");
  write_demo(t.path() / "a", 8, 0.3, 0.5);
  write_demo(t.path() / "b", 8, 0.3, 0.4);
  const std::string out = (t.path() / "out").string();
  const std::string cmd = std::string(bin) + " plot --run " + (t.path() / "a").string() +
                          " --label first --run " + (t.path() / "b").string() + " --out " + out +
                          " 2>" + (t.path() / "err.txt").string();
  int status = 0;
  const std::string text = ::stoa::testing::capture_output(cmd, &status);
  ASSERT_EQ(status, 0) << stoa::testing::read_text(t.path() / "err.txt");
  const auto files = nlohmann::json::parse(text);
  ASSERT_TRUE(files.is_array());
  int pngs = 0;
  for (const auto& f : files) {
    const std::string path = f.get<std::string>();
    EXPECT_TRUE(fs::exists(path)) << path;
    if (fs::path(path).extension() == ".png") {
      pngs++;
      EXPECT_TRUE(is_png(path)) << path;
    }
  }
  EXPECT_EQ(pngs, 9);
  EXPECT_TRUE(fs::exists(t.path() / "out" / "plot.gp"));
  EXPECT_TRUE(fs::exists(t.path() / "out" / "r1-first.steps.dat"));
  EXPECT_TRUE(fs::exists(t.path() / "out" / "r2-b.steps.dat"));
}

}  // namespace
}  // namespace stoa::app::plot
