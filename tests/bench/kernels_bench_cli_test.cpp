// `stoa bench kernels --json` runs end to end and prints the documented JSON shape with
// positive figures.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>

#include "support/stoa_cli.h"

namespace {

TEST(BenchKernelsCli, PrintsJsonWithPositiveFigures) {
  const char* binary = std::getenv("STOA_BINARY");
  ASSERT_NE(binary, nullptr) << "STOA_BINARY is not set (run through ctest)";
  const std::string cmd =
      std::string(binary) +
      " bench kernels --json --quick --threads 1 --batch 1 3 --min-seconds 0.01";
  int status = 0;
  const std::string out = ::stoa::testing::capture_output(cmd, &status);
  ASSERT_EQ(status, 0) << cmd << "\n" << out;
  const auto doc = nlohmann::json::parse(out);
  EXPECT_FALSE(doc.at("cpu").get<std::string>().empty());
  EXPECT_GT(doc.at("memory").at("memcpy_gbps").at("1").get<double>(), 0.0);
  EXPECT_GT(doc.at("memory").at("read_gbps").at("1").get<double>(), 0.0);
  const auto& results = doc.at("results");
  ASSERT_EQ(results.size(), 4u);  // {w8a8, w8a32} x batch {1, 3}
  for (const auto& r : results) {
    EXPECT_GT(r.at("weight_gbps").get<double>(), 0.0) << r.dump();
    EXPECT_GT(r.at("gflops").get<double>(), 0.0) << r.dump();
    EXPECT_EQ(r.at("threads").get<int>(), 1);
  }
}

}  // namespace
