// `stoa bench engine --backend vulkan` beside llama.cpp's Vulkan build (stoa-llama-oracle-vulkan)
// on the same device (Mesa's lavapipe here): both figures, their ratio, the device each computed
// on (the same one) and the load average; a missing peer and a device llama.cpp does not list
// are errors in words.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "support/stoa_cli.h"

namespace {

std::string binary() {
  const char* b = std::getenv("STOA_BINARY");
  return b ? b : "";
}

std::filesystem::path peer() {
  return std::filesystem::path(binary()).parent_path() / "stoa-llama-oracle-vulkan";
}

TEST(BenchVulkanPeer, ReportsBothFiguresOnOneDevice) {
  ASSERT_FALSE(binary().empty()) << "STOA_BINARY is not set (run through ctest)";
  if (!std::filesystem::exists(peer()))
    GTEST_SKIP() << "stoa-llama-oracle-vulkan not built (scripts/setup installs its package)";
  int status = 0;
  const std::string out = ::stoa::testing::capture_output(
      "'" + binary() +
          "' bench engine --backend vulkan --json --quick --threads 1 --preset tiny-qwen3 "
          "--prompt-tokens 16 --decode-steps 2 --decode-warmup 1 --batch 1 2>&1",
      &status);
  ASSERT_EQ(status, 0) << out;
  const nlohmann::json j = nlohmann::json::parse(out.substr(out.rfind("\n{") + 1));
  EXPECT_EQ(j["backend"], "vulkan");
  EXPECT_EQ(j["peer"], "llama.cpp vulkan");
  ASSERT_EQ(j["models"].size(), 1u);
  const nlohmann::json& m = j["models"][0];
  EXPECT_NE(m["device_name"], "cpu");
  EXPECT_EQ(m["llama_cpp_device"], m["device_name"]);  // the same device, by name
  EXPECT_GT(m["load_average"].get<double>(), 0);
  for (const char* k : {"prefill_tps", "decode_tps_b1"}) {
    EXPECT_GT(m["ours"][k].get<double>(), 0) << k;
    EXPECT_GT(m["llama_cpp"][k].get<double>(), 0) << k;
    EXPECT_NEAR(m["ratio"][k].get<double>(),
                m["ours"][k].get<double>() / m["llama_cpp"][k].get<double>(), 1e-9);
  }
}

TEST(BenchVulkanPeer, MissingPeerIsAnErrorInWords) {
  ASSERT_FALSE(binary().empty());
  int status = 0;
  const std::string out = ::stoa::testing::capture_output(
      "'" + binary() +
          "' bench engine --backend vulkan --oracle /nonexistent/stoa-llama-oracle-vulkan "
          "--quick --preset tiny-qwen3 2>&1",
      &status);
  EXPECT_NE(status, 0);
  EXPECT_NE(out.find("@node-llama-cpp/linux-x64-vulkan"), std::string::npos) << out;
}

TEST(BenchVulkanPeer, PeerRefusesADeviceItDoesNotList) {
  if (!std::filesystem::exists(peer())) GTEST_SKIP() << "stoa-llama-oracle-vulkan not built";
  int status = 0;
  // The device check comes before the model is read: no GGUF is needed.
  std::string out = ::stoa::testing::capture_output(
      "'" + peer().string() + "' info --gguf /nonexistent --gpu 'no such device' 2>/dev/null",
      &status);
  EXPECT_NE(status, 0);
  EXPECT_NE(out.find("no GPU device named like 'no such device'"), std::string::npos) << out;
  // No Vulkan driver at all: no GPU device to be had.
  out = ::stoa::testing::capture_output("VK_ICD_FILENAMES=/nonexistent.json '" + peer().string() +
                                            "' info --gguf /nonexistent --gpu any 2>/dev/null",
                                        &status);
  EXPECT_NE(status, 0);
  EXPECT_NE(out.find("no GPU device"), std::string::npos) << out;
}

}  // namespace
