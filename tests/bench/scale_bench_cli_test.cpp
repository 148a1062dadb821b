// `stoa bench scale --json` end to end through the built binary, with one checking routine for
// both sizes:
// - BenchScaleCli (integration, CI): a 3-layer cut of the lfm2-350m shape (int8 view ~110 MB):
//   the documented JSON keys, and the figures a working pipeline must produce — a resumed
//   download that moved at most 1.1x the blob through a proxy that cut it, a PULSE version near
//   the simulated step's sparsity, and the worker's peak RSS at anchor load within the issue-17
//   target 1.15 x S + 512 MiB (S = the int8 bytes). At this size the 512 MiB (which includes the
//   binary's ~170 MB) dominates, so the ratio that matters at 8.9 GB is also bounded: as
//   measured on 2026-12-01 the worker's anchor load (join, spool download, streamed decode, the
//   sync's state beside the engine's weights) peaked at ~3.5 x S above its baseline; the second
//   bound (4 x S + 256 MiB) fails if that grows.
// - BenchScaleSlow (slow: ~40 min, ~10 GB of memory, ~27 GB of disk under TMPDIR; run it under
//   `flock /tmp/bigmem.lock`): the whole lfm2-8b-a1b, the target itself — the worker's peak
//   through anchor_load, generate and patch_apply each <= 1.15 x S + 512 MiB. With
//   STOA_BENCH_SCALE_LAYERS=N it runs the preset's first N layers instead (to try the test
//   quickly; the figures of record are the whole model's, docs/design/scale.md).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "support/sanitizer.h"
#include "support/stoa_cli.h"

namespace {

// Runs `stoa bench scale ARGS --json` and parses its report into *doc.
void run_bench_scale(const std::string& args, nlohmann::json* doc) {
  const char* binary = std::getenv("STOA_BINARY");
  ASSERT_NE(binary, nullptr) << "STOA_BINARY is not set (run through ctest)";
  const std::string cmd = std::string(binary) + " bench scale " + args + " --json 2>/dev/null";
  int status = 0;
  const std::string out = ::stoa::testing::capture_output(cmd, &status);
  ASSERT_EQ(status, 0) << cmd << "\n" << out;
  *doc = nlohmann::json::parse(out);
}

struct Expected {
  std::string preset;
  double min_int8_bytes = 0;
  double max_int8_bytes = 0;
  // Phases whose worker peak must be within the issue-17 target 1.15 x S + 512 MiB.
  std::vector<const char*> target_phases;
  // When > 0: the anchor load's peak must also stay below this many S + 256 MiB.
  double anchor_ratio_bound = 0;
};

// The report's keys and the figures every working run must produce (see the file comment).
void check_report(const nlohmann::json& doc, const Expected& want) {
  EXPECT_EQ(doc.at("preset").get<std::string>(), want.preset);
  const double s = doc.at("int8_bytes").get<double>();
  EXPECT_GT(s, want.min_int8_bytes);
  EXPECT_LT(s, want.max_int8_bytes);
  for (const char* name : {"make_model", "anchor_load", "generate", "patch_apply"}) {
    const auto& p = doc.at("phases").at(name);
    EXPECT_GT(p.at("peak_rss_bytes").get<double>(), 0) << name;
    EXPECT_GT(p.at("seconds").get<double>(), 0) << name;
  }
  // Under a sanitizer the run is still checked end to end; only its peak-RSS bounds are not.
  if (!stoa::testing::kSanitizerShadowsMemory) {
    const double mib = 1024.0 * 1024.0;
    for (const char* name : want.target_phases) {
      EXPECT_LE(doc.at("phases").at(name).at("peak_rss_bytes").get<double>(), 1.15 * s + 512 * mib)
          << name << ": the issue-17 target";
    }
    if (want.anchor_ratio_bound > 0) {
      EXPECT_LE(doc.at("phases").at("anchor_load").at("peak_rss_bytes").get<double>(),
                want.anchor_ratio_bound * s + 256 * mib)
          << "the worker's anchor load grew per int8 byte";
    }
  }

  const auto& pulse = doc.at("pulse");
  // One simulated step at lr 2e-6 moves ~0.5% of the int8 values (plus the dense f32 router of
  // a MoE shape).
  EXPECT_GT(pulse.at("changed_fraction").get<double>(), 0.001);
  EXPECT_LT(pulse.at("changed_fraction").get<double>(), 0.02);
  EXPECT_GT(pulse.at("patch_bytes").get<double>(), 0);
  EXPECT_LT(pulse.at("patch_bytes").get<double>(), 0.05 * s);
  EXPECT_GT(pulse.at("make_seconds").get<double>(), 0);
  EXPECT_GT(pulse.at("apply_seconds").get<double>(), 0);

  const auto& download = doc.at("download");
  const double blob = download.at("blob_bytes").get<double>();
  EXPECT_GT(blob, 0.5 * s);
  EXPECT_GE(download.at("cuts").get<int>(), 1);
  EXPECT_GE(download.at("bytes_transferred").get<double>(), blob);
  EXPECT_LE(download.at("bytes_transferred").get<double>(), 1.1 * blob) << "the resumed download";
  EXPECT_EQ(doc.at("load_average").size(), 3u);
}

TEST(BenchScaleCli, RunsEndToEndWithSaneFigures) {
  nlohmann::json doc;
  ASSERT_NO_FATAL_FAILURE(run_bench_scale(
      "--preset lfm2-350m --layers 3 --threads 1 --tokens 8 --cut-mb 8 --timeout 120", &doc));
  Expected want;
  want.preset = "lfm2-350m";
  want.min_int8_bytes = 50e6;
  want.max_int8_bytes = 200e6;
  want.target_phases = {"anchor_load"};
  want.anchor_ratio_bound = 4.0;
  check_report(doc, want);
}

TEST(BenchScaleSlow, SeedModelMeetsTheWorkerMemoryTarget) {
  const char* layers = std::getenv("STOA_BENCH_SCALE_LAYERS");
  // The model, its anchor and the spools (~27 GB for the whole model) go under TMPDIR, removed
  // by the bench at the end.
  const std::filesystem::path workdir =
      std::filesystem::temp_directory_path() / ("stoa_bench_scale_" + std::to_string(::getpid()));
  std::string args = "--preset lfm2-8b-a1b --workdir " + workdir.string();
  if (layers) args += std::string(" --layers ") + layers;
  nlohmann::json doc;
  ASSERT_NO_FATAL_FAILURE(run_bench_scale(args, &doc));
  Expected want;
  want.preset = "lfm2-8b-a1b";
  // The whole model is 8.87 GB of int8; a cut holds at least the embedding (~0.14 GB).
  want.min_int8_bytes = layers ? 0.1e9 : 8.5e9;
  want.max_int8_bytes = 9.2e9;
  want.target_phases = {"anchor_load", "generate", "patch_apply"};
  check_report(doc, want);
}

}  // namespace
