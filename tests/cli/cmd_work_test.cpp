// `stoa work --kernel-target` through the real binary: a target this machine lacks is refused at
// once with the targets it has (exit 2, nothing started); a target it has is forced (any case)
// before anything else runs and said on stdout.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cctype>
#include <filesystem>
#include <string>
#include <vector>

#include "kernels/targets.h"
#include "support/stoa_cli.h"
#include "support/temp_dir.h"

namespace {
namespace fs = std::filesystem;
using stoa::testing::read_text;
using stoa::testing::run_stoa;

struct WorkCli : stoa::testing::TempDirTest {
  // A hub nobody listens on and a model directory that does not exist: the kernel target is
  // decided before either is touched.
  std::string work_args(const std::string& target) const {
    return "work --hub http://127.0.0.1:9 --token t --join-timeout 0 --model " +
           (dir / "no-model").string() + " --state-dir " + (dir / "state").string() +
           " --kernel-target " + target;
  }
};

TEST_F(WorkCli, AnUnknownKernelTargetIsRefusedNamingTheOnesThisMachineHas) {
  EXPECT_EQ(run_stoa(dir, work_args("AVX9000")), 2);
  const std::string err = read_text(dir / "err.txt");
  EXPECT_NE(err.find("--kernel-target AVX9000: this machine has no such kernel target"),
            std::string::npos)
      << err;
  for (int64_t target : stoa::kernels::available_targets())
    EXPECT_NE(err.find(stoa::kernels::target_name(target)), std::string::npos) << err;
  EXPECT_EQ(read_text(dir / "out.txt").find("Connecting"), std::string::npos);
  EXPECT_FALSE(fs::exists(dir / "state"));
}

TEST_F(WorkCli, AKernelTargetThisMachineHasIsForcedBeforeAnythingElse) {
  const std::vector<int64_t> targets = stoa::kernels::available_targets();
  ASSERT_GE(targets.size(), 2u);
  const std::string best = stoa::kernels::target_name(targets.front());
  const std::string worst = stoa::kernels::target_name(targets.back());
  std::string lower = worst;
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  // The missing model directory ends the run (exit 1) — after the target was forced.
  EXPECT_EQ(run_stoa(dir, work_args(lower)), 1) << read_text(dir / "err.txt");
  const std::string out = read_text(dir / "out.txt");
  EXPECT_NE(out.find("Kernel target: " + worst + " (forced; this machine's best is " + best + ")"),
            std::string::npos)
      << out << read_text(dir / "err.txt");
}

}  // namespace
