// `stoa bench scale --json` end to end on a CI-sized cut of the lfm2-350m shape (3 layers, int8
// view ~110 MB): the documented JSON keys, and the figures a working pipeline must produce —
// a resumed download that moved at most 1.1x the blob through a proxy that cut it, a PULSE
// version near the simulated step's sparsity, and the worker's peak RSS at anchor load within
// the issue-17 target 1.15 x S + 512 MiB (S = the int8 bytes). At this size the 512 MiB (which
// includes the binary's ~170 MB) dominates, so the ratio that matters at 8.9 GB is also bounded:
// as measured on 2026-12-01 the worker's anchor load (join, spool download, streamed decode, the
// sync's state beside the engine's weights) peaked at ~3.5 x S above its baseline; the second
// bound (4 x S + 256 MiB) fails if that grows. docs/design/scale.md has the 8B-shape figures.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>

namespace {

TEST(BenchScaleCli, RunsEndToEndWithSaneFigures) {
  const char* binary = std::getenv("STOA_BINARY");
  ASSERT_NE(binary, nullptr) << "STOA_BINARY is not set (run through ctest)";
  const std::string cmd = std::string(binary) +
                          " bench scale --preset lfm2-350m --layers 3 --threads 1 --tokens 8"
                          " --cut-mb 8 --timeout 120 --json 2>/dev/null";
  FILE* pipe = popen(cmd.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string out;
  char buf[4096];
  for (size_t n; (n = fread(buf, 1, sizeof buf, pipe)) > 0;) out.append(buf, n);
  ASSERT_EQ(pclose(pipe), 0) << cmd << "\n" << out;
  const auto doc = nlohmann::json::parse(out);

  EXPECT_EQ(doc.at("preset").get<std::string>(), "lfm2-350m");
  const double s = doc.at("int8_bytes").get<double>();
  EXPECT_GT(s, 50e6);
  EXPECT_LT(s, 200e6);
  for (const char* name : {"make_model", "anchor_load", "generate", "patch_apply"}) {
    const auto& p = doc.at("phases").at(name);
    EXPECT_GT(p.at("peak_rss_bytes").get<double>(), 0) << name;
    EXPECT_GT(p.at("seconds").get<double>(), 0) << name;
  }
  const double anchor_peak = doc.at("phases").at("anchor_load").at("peak_rss_bytes").get<double>();
  const double mib = 1024.0 * 1024.0;
  EXPECT_LE(anchor_peak, 1.15 * s + 512 * mib) << "the issue-17 target";
  EXPECT_LE(anchor_peak, 4.0 * s + 256 * mib) << "the worker's anchor load grew per int8 byte";

  const auto& pulse = doc.at("pulse");
  // One simulated step at lr 2e-6 moves ~0.5% of the int8 values (plus the dense f32 router,
  // absent in this non-MoE shape).
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
  EXPECT_LE(download.at("bytes_transferred").get<double>(), 1.1 * blob);
  EXPECT_EQ(doc.at("load_average").size(), 3u);
}

}  // namespace
