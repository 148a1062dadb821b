// core/machine.h against this very process and machine: the figures a bench reports are read
// from the real /proc and getloadavg, so they are checked for what must hold of them, not for
// values.
#include "core/machine.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstring>
#include <vector>

namespace stoa {
namespace {

TEST(Machine, LoadAveragesAreThreeNonNegativeFigures) {
  const std::array<double, 3> load = load_averages();
  for (double l : load) EXPECT_GE(l, 0.0);  // Linux has getloadavg: never the -1 of "unknown"
  EXPECT_GE(load_average_1m(), 0.0);
}

TEST(Machine, ProcessCpuSecondsCountThisProcessesWork) {
  const double before = process_cpu_seconds();
  // Busy for at least 50 ms of CPU: the clock must have moved by about that.
  volatile uint64_t sink = 0;
  while (process_cpu_seconds() - before < 0.05) sink = sink + 1;
  EXPECT_GE(process_cpu_seconds() - before, 0.05);
  EXPECT_LT(process_cpu_seconds() - before, 5.0);
}

TEST(Machine, CpuModelNameIsNotEmpty) {
  EXPECT_FALSE(cpu_model_name().empty());
}

TEST(Machine, OwnMemoryGrowsWithWhatThisProcessTouches) {
  const ProcessMemory before = own_process_memory();
  EXPECT_GT(before.rss_bytes, 0u);
  EXPECT_GE(before.hwm_bytes, before.rss_bytes);
  // 64 MiB written (so resident), then still held: the high-water mark rises past it.
  std::vector<char> block(size_t{64} << 20);
  std::memset(block.data(), 1, block.size());
  const ProcessMemory after = own_process_memory();
  EXPECT_GE(after.hwm_bytes, before.rss_bytes + (size_t{60} << 20));
  EXPECT_EQ(block[block.size() / 2], 1);
  // The same process by pid reads the same file.
  EXPECT_GE(read_process_memory(::getpid()).hwm_bytes, after.hwm_bytes);
}

TEST(Machine, AProcessThatIsGoneReadsAsZeros) {
  // Beyond the kernel's pid_max (at most 2^22): no such process.
  const ProcessMemory gone = read_process_memory(pid_t{1} << 23);
  EXPECT_EQ(gone.rss_bytes, 0u);
  EXPECT_EQ(gone.hwm_bytes, 0u);
}

}  // namespace
}  // namespace stoa
