// The bench machinery on a tiny simulated model (unit), and the full simulated bench on a ~100M
// parameter Qwen3-shaped model (slow; prints the JSON table that docs/design/pulse.md quotes).
#include <gtest/gtest.h>

#include <cstdio>

#include <nlohmann/json.hpp>

#include "bench/pulse_bench.h"

namespace stoa::pulse {
namespace {

void print_table(const std::vector<PulseBenchRun>& runs) {
  std::printf("%-8s %5s %9s %11s %12s %12s %11s %12s %11s %9s %9s %s\n", "lr", "steps", "changed",
              "patch", "full_int8", "full_bf16", "xor_zstd", "full_zstd", "bf16_patch", "enc_MB/s",
              "app_MB/s", "bitexact");
  for (const auto& r : runs) {
    std::printf("%-8g %5d %8.4f%% %11llu %12llu %12llu %11llu %12llu %11llu %9.0f %9.0f %s\n", r.lr,
                r.steps, r.changed_fraction * 100, (unsigned long long)r.patch_bytes,
                (unsigned long long)r.full_int8_bytes, (unsigned long long)r.full_bf16_bytes,
                (unsigned long long)r.xor_zstd_bytes, (unsigned long long)r.full_zstd_bytes,
                (unsigned long long)r.bf16_patch_bytes, r.encode_mbps, r.apply_mbps,
                r.bitexact ? "true" : "false");
    if (!r.coding_bytes.empty()) {
      std::printf("         position codings:");
      for (const auto& [name, bytes] : r.coding_bytes)
        std::printf(" %s=%llu", name.c_str(), (unsigned long long)bytes);
      std::printf("\n");
    }
  }
}

TEST(PulseBench, TinyModelProducesTheIssueJsonShape) {
  nlohmann::json json;
  PulseBenchOptions options;
  options.measure_codings = true;
  auto runs = run_simulated_pulse_bench(sim_layout_tiny(), {1e-6, 1e-5}, {1, 4}, 5, options, &json);
  ASSERT_EQ(runs.size(), 4u);
  ASSERT_EQ(json["runs"].size(), 4u);
  for (const auto& r : json["runs"]) {
    for (const char* key : {"lr", "steps", "changed_fraction", "patch_bytes", "full_int8_bytes",
                            "full_bf16_bytes", "xor_zstd_bytes", "full_zstd_bytes",
                            "bf16_patch_bytes", "encode_mbps", "apply_mbps", "bitexact"})
      EXPECT_TRUE(r.contains(key)) << key;
    EXPECT_EQ(r.size(), 12u);
    EXPECT_TRUE(r["bitexact"].get<bool>());
  }
  // More steps and a larger lr change more values.
  EXPECT_LT(runs[0].changed_fraction, runs[1].changed_fraction);
  EXPECT_LT(runs[0].changed_fraction, runs[2].changed_fraction);
  EXPECT_LT(runs[0].patch_bytes, runs[0].full_zstd_bytes);
  EXPECT_EQ(runs[0].coding_bytes.size(), 4u);
  print_table(runs);
}

// Registered only as test_pulse_bench_100m (label slow); test_pulse_bench filters it out.
TEST(PulseBenchSlow, Simulated100MModel) {
  nlohmann::json json;
  PulseBenchOptions options;
  options.measure_codings = true;
  SimLayout layout = sim_layout_100m();
  auto runs =
      run_simulated_pulse_bench(layout, {1e-6, 3e-6, 1e-5}, {1, 4, 16}, 2026, options, &json);
  print_table(runs);
  std::printf("%s\n", json.dump().c_str());
  ASSERT_EQ(runs.size(), 9u);
  for (const auto& r : runs) EXPECT_TRUE(r.bitexact);
  const PulseBenchRun& first = runs[0];  // lr 1e-6, one step: the issue's targets
  EXPECT_LE(first.changed_fraction, 0.01);
  EXPECT_LE(first.patch_bytes, first.full_int8_bytes / 100);
  EXPECT_LT(first.patch_bytes, first.xor_zstd_bytes);
  EXPECT_LT(first.patch_bytes, first.bf16_patch_bytes);
  EXPECT_LT(first.patch_bytes, first.full_zstd_bytes);
}

}  // namespace
}  // namespace stoa::pulse
