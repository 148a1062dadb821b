// Bad input to `stoa plot`: every case ends in a count of what was skipped or in a stoa::Error
// that names the file and what is wrong, never in a crash (also run under ASan + UBSan).
#include <filesystem>
#include <string>

#include <gtest/gtest.h>

#include "app/plot/plot_data.h"
#include "app/plot/plot_fixture.h"
#include "app/plot/plot_gnuplot.h"
#include "app/plot/plot_script.h"
#include "core/error.h"

namespace stoa::app::plot {
namespace {
namespace fs = std::filesystem;
using namespace testing;

// Runs f, expecting a stoa::Error of `kind` whose message contains every one of `parts`.
template <typename F>
void expect_error(F f, ErrorKind kind, std::initializer_list<std::string> parts) {
  try {
    f();
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), kind) << e.what();
    for (const auto& p : parts)
      EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what();
  }
}

TEST(PlotFault, MalformedLinesAreSkippedAndCounted) {
  TempDir t("malformed");
  const std::string good = steps_text(1, 4, 0.0);
  write_file(t.path() / "steps.jsonl",
             good +
                 "not json at all\n"
                 "[1, 2, 3]\n"
                 "{\"version\": 3}\n"
                 "{\"step\": \"five\"}\n"
                 "{\"step\": 6, \"staleness_histogram\": {\"-1\": 2}}\n"
                 "{\"step\": 7, \"staleness_histogram\": {\"x\": 2}}\n"
                 "\n   \n" +
                 steps_text(5, 5, 10.0) +
                 "{\"step\": 9, \"reward_mean\": 0.5, \"tv_m");  // a half-written last line
  RunData r = load_run(t.path().string(), "");
  EXPECT_EQ(r.steps.size(), 5u);
  EXPECT_EQ(r.lines_skipped, 7);
  ASSERT_FALSE(r.warnings.empty());
  EXPECT_NE(r.warnings[0].find("steps.jsonl:5: not a JSON object"), std::string::npos)
      << r.warnings[0];
  EXPECT_NE(r.warnings[2].find("no integer \"step\""), std::string::npos) << r.warnings[2];
  EXPECT_NE(r.warnings[4].find("staleness_histogram entry \"-1\""), std::string::npos)
      << r.warnings[4];
}

TEST(PlotFault, NoUsableStepIsAClearError) {
  TempDir t("nothing");
  write_file(t.path() / "steps.jsonl", "garbage\n{\"step\": null}\n");
  expect_error([&] { load_run(t.path().string(), ""); }, ErrorKind::kBadFormat,
               {"steps.jsonl", "no usable step", "2 malformed"});
  write_file(t.path() / "steps.jsonl", "");
  expect_error([&] { load_run(t.path().string(), ""); }, ErrorKind::kBadFormat, {"no usable step"});
}

TEST(PlotFault, MissingDirectoryOrStepLog) {
  TempDir t("missing");
  const std::string nowhere = (t.path() / "nowhere").string();
  expect_error([&] { load_run(nowhere, ""); }, ErrorKind::kNotFound, {nowhere, "does not exist"});
  fs::create_directories(t.path() / "empty");
  expect_error([&] { load_run((t.path() / "empty").string(), ""); }, ErrorKind::kNotFound,
               {"no step log", "run/steps.jsonl"});
}

TEST(PlotFault, BadEvalJsonsAreSkippedWithAWarning) {
  TempDir t("evals");
  write_demo(t.path(), 3, 0.3, 0.5);
  write_file(t.path() / "logs" / "eval-broken.json", "{\"pass1\": ");
  write_file(t.path() / "logs" / "eval-nopass.json", "{\"split\": \"validation\"}");
  write_file(t.path() / "logs" / "eval-somewhere.json", eval_json(0.4));  // no step, no number
  RunData r = load_run(t.path().string(), "");
  EXPECT_EQ(r.evals.size(), 2u);
  ASSERT_EQ(r.warnings.size(), 3u);
  EXPECT_NE(r.warnings[0].find("eval-broken.json"), std::string::npos) << r.warnings[0];
  EXPECT_NE(r.warnings[2].find("does not say which step"), std::string::npos) << r.warnings[2];
}

TEST(PlotFault, GnuplotMissingOrFailing) {
  TempDir t("gnuplot");
  write_file(t.path() / "steps.jsonl", steps_text(1, 2, 0.0));
  PlotFiles f = write_plot_inputs({load_run(t.path().string(), "")}, (t.path() / "o").string());
  expect_error([&] { run_gnuplot("/nonexistent/gnuplot", f.script); }, ErrorKind::kNotFound,
               {"gnuplot not found", "/nonexistent/gnuplot", "gnuplot-nox"});
  expect_error([&] { run_gnuplot("no-such-gnuplot-here", f.script); }, ErrorKind::kNotFound,
               {"on PATH"});
  // An executable that fails: its exit code and log are reported.
  write_file(t.path() / "fake-gnuplot",
             "#!/bin/sh\necho \"line 3: undefined variable\" >&2\nexit 3\n");
  fs::permissions(t.path() / "fake-gnuplot", fs::perms::owner_all);
  expect_error([&] { run_gnuplot((t.path() / "fake-gnuplot").string(), f.script); }, ErrorKind::kIo,
               {"exited with 3", "undefined variable", "gnuplot.log"});
}

TEST(PlotFault, UnwritableOutputDirectory) {
  TempDir t("unwritable");
  write_file(t.path() / "steps.jsonl", steps_text(1, 2, 0.0));
  write_file(t.path() / "a-file", "x");
  const std::string out = (t.path() / "a-file" / "out").string();
  expect_error([&] { write_plot_inputs({load_run(t.path().string(), "")}, out); }, ErrorKind::kIo,
               {"cannot create output directory", out});
}

}  // namespace
}  // namespace stoa::app::plot
