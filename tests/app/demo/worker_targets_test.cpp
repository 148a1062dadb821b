#include "app/demo/worker_targets.h"

#include <gtest/gtest.h>

#include "core/error.h"
#include "kernels/targets.h"

namespace stoa::app {
namespace {

const std::vector<std::string> kAvailable = {"AVX3_DL", "AVX3", "AVX2", "SSE4", "EMU128"};

TEST(WorkerTargets, ListsAreMatchedInAnyCaseAndAllMeansEveryTarget) {
  EXPECT_TRUE(parse_kernel_targets("", kAvailable).empty());
  EXPECT_EQ(parse_kernel_targets("all", kAvailable), kAvailable);
  EXPECT_EQ(parse_kernel_targets(" ALL ", kAvailable), kAvailable);
  EXPECT_EQ(parse_kernel_targets("avx2, SSE4,avx3_dl", kAvailable),
            (std::vector<std::string>{"AVX2", "SSE4", "AVX3_DL"}));
}

TEST(WorkerTargets, ANameThisMachineLacksIsRefusedNamingTheOnesItHas) {
  try {
    parse_kernel_targets("AVX2,NEON", kAvailable);
    FAIL() << "NEON is not available";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("no kernel target \"NEON\""), std::string::npos) << what;
    EXPECT_NE(what.find("AVX3_DL, AVX3, AVX2, SSE4, EMU128"), std::string::npos) << what;
  }
  EXPECT_THROW(parse_kernel_targets("AVX2,,SSE4", kAvailable), Error);
}

TEST(WorkerTargets, WorkersGetTheTargetsRoundRobin) {
  EXPECT_TRUE(assign_kernel_targets({}, 4).empty());
  EXPECT_EQ(assign_kernel_targets({"AVX3_DL", "AVX2", "SSE4"}, 4),
            (std::vector<std::string>{"AVX3_DL", "AVX2", "SSE4", "AVX3_DL"}));
  EXPECT_EQ(assign_kernel_targets({"AVX3_DL", "AVX2", "SSE4"}, 2),
            (std::vector<std::string>{"AVX3_DL", "AVX2"}));
}

TEST(WorkerTargets, TheAvailableTargetsAreThisMachinesBestFirst) {
  const std::vector<std::string> names = available_kernel_targets();
  ASSERT_FALSE(names.empty());
  EXPECT_EQ(names.front(), kernels::target_name(kernels::active_target()));
  EXPECT_EQ(parse_kernel_targets("all", names), names);
}

}  // namespace
}  // namespace stoa::app
