// `stoa bench engine --json --quick` end to end on the tiny presets: the JSON has the issue's
// shape (models[].{name, params, ours, llama_cpp, ratio}, threads, cpu) with positive figures,
// beside llama.cpp when stoa-llama-oracle is built next to the binary (else --no-llama).
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "support/stoa_cli.h"

namespace {

std::string run(const std::string& cmd, int* status) {
  return ::stoa::testing::capture_output(cmd, status);
}

TEST(BenchEngineCli, QuickJsonShape) {
  const char* binary = std::getenv("STOA_BINARY");
  ASSERT_NE(binary, nullptr) << "STOA_BINARY is not set (run through ctest)";
  const auto oracle = std::filesystem::path(binary).parent_path() / "stoa-llama-oracle";
  const bool llama = std::filesystem::exists(oracle);
  int status = 0;
  std::string out = run(std::string("'") + binary +
                            "' bench engine --json --quick --threads 1 --preset tiny-qwen3 "
                            "tiny-lfm2moe --prompt-tokens 16 --decode-steps 2 --batch 1 8 32" +
                            (llama ? "" : " --no-llama") + " 2>/dev/null",
                        &status);
  ASSERT_EQ(status, 0) << out;
  nlohmann::json j = nlohmann::json::parse(out);
  EXPECT_EQ(j["threads"], 1);
  EXPECT_TRUE(j["cpu"].is_string());
  EXPECT_GT(j["memcpy_gbps"].get<double>(), 0);
  EXPECT_GT(j["peak_rss_bytes"].get<double>(), 0);
  ASSERT_EQ(j["models"].size(), 2u);
  for (const auto& m : j["models"]) {
    EXPECT_GT(m["params"].get<double>(), 0);
    EXPECT_GT(m["kv_bytes_per_cached_token"].get<double>(), 0);
    // The int8 weights are held once (packed or on the grid, never both), and resident.
    const double held = m["weight_bytes_held"].get<double>();
    EXPECT_GE(held, m["weight_bytes"].get<double>());
    EXPECT_LT(held, 1.3 * m["weight_bytes"].get<double>());
    EXPECT_GT(m["rss_after_runs_bytes"].get<double>(), held);
    EXPECT_GT(m["rss_before_load_bytes"].get<double>(), 0);
    for (const char* k : {"prefill_tps", "decode_tps_b1", "decode_tps_b8", "decode_tps_b32"}) {
      EXPECT_GT(m["ours"][k].get<double>(), 0) << m["name"] << " " << k;
      if (llama) {
        EXPECT_GT(m["llama_cpp"][k].get<double>(), 0) << m["name"] << " " << k;
        EXPECT_NEAR(m["ratio"][k].get<double>(),
                    m["ours"][k].get<double>() / m["llama_cpp"][k].get<double>(), 1e-9);
      }
    }
  }
  EXPECT_EQ(j["models"][0]["name"], "tiny-qwen3");
}

TEST(BenchEngineCli, BadBackendIsAnError) {
  const char* binary = std::getenv("STOA_BINARY");
  ASSERT_NE(binary, nullptr);
  int status = 0;
  std::string out =
      run(std::string("'") + binary + "' bench engine --no-llama --backend nonsense 2>&1", &status);
  EXPECT_NE(status, 0);
  EXPECT_NE(out.find("nonsense"), std::string::npos) << out;
}

}  // namespace
