// `stoa bench vulkan-memory --json` through the built binary (issue 54 item 3) on bench-lfm2moe
// (~0.37 GB of int8 weights, every architecture part the seed has: attention, short conv, dense
// and MoE feed-forwards). Shared, on a device that imports host memory (lavapipe in CI), the
// weights exist once: the backend's own device allocations are the f32 vectors only, and the
// peak is within 1.15 x the int8 bytes + 512 MiB; mirrored, they are held twice, so the mirrored
// peak exceeds the shared one by most of the int8 bytes. A placement it does not know is refused.
#include <gtest/gtest.h>

#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>

#include "support/stoa_cli.h"

namespace {

nlohmann::json run_bench(const std::string& args, int* status) {
  const char* binary = std::getenv("STOA_BINARY");
  EXPECT_NE(binary, nullptr) << "STOA_BINARY is not set (run through ctest)";
  if (binary == nullptr) return {};
  const std::string cmd = std::string(binary) + " bench vulkan-memory --preset bench-lfm2moe " +
                          args + " --json 2>/dev/null";
  const std::string out = ::stoa::testing::capture_output(cmd, status);
  if (*status != 0) return {};
  return nlohmann::json::parse(out);
}

TEST(BenchVulkanMemoryCli, SharedWeightsExistOnceAndMirroredTwice) {
  int status = 0;
  const nlohmann::json shared = run_bench("--placement shared", &status);
  ASSERT_EQ(status, 0);
  const nlohmann::json mirrored = run_bench("--placement mirror", &status);
  ASSERT_EQ(status, 0);
  const double s = shared.at("int8_bytes").get<double>();
  EXPECT_GT(s, 3e8);
  EXPECT_EQ(mirrored.at("int8_bytes").get<double>(), s);
  EXPECT_TRUE(shared.at("first_logit_finite").get<bool>());
  EXPECT_FALSE(mirrored.at("shares_host_weights").get<bool>());
  EXPECT_GE(mirrored.at("device_allocated_weight_bytes").get<double>(), 0.99 * s);
  if (!shared.at("imports_host_memory").get<bool>()) {
    EXPECT_FALSE(shared.at("shares_host_weights").get<bool>()) << "no imports: mirrored";
    return;
  }
  ASSERT_TRUE(shared.at("shares_host_weights").get<bool>());
  EXPECT_LT(shared.at("device_allocated_weight_bytes").get<double>(), 0.01 * s);
  EXPECT_GE(shared.at("device_imported_weight_bytes").get<double>(), 0.99 * s);
  const double shared_peak = shared.at("peak_rss_bytes").get<double>();
  EXPECT_LE(shared_peak, shared.at("bound_bytes").get<double>());
  EXPECT_TRUE(shared.at("within_bound").get<bool>());
  EXPECT_GE(mirrored.at("peak_rss_bytes").get<double>() - shared_peak, 0.8 * s)
      << "the mirror holds a second copy of the weights";
}

TEST(BenchVulkanMemoryCli, RefusesAnUnknownPlacement) {
  int status = 0;
  run_bench("--placement twice", &status);
  EXPECT_NE(status, 0);
}

}  // namespace
