// `stoa bench kernels`: speed of the int8 matmul kernels.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace stoa::bench {

struct KernelsBenchOptions {
  bool json = false;
  std::vector<int> threads = {1, 2};
  std::vector<int> batches = {1, 8, 32};
  double min_seconds = 0.25;
  bool all_targets = false;
  bool quick = false;
  bool hot = false;  // one weight copy that stays in cache: the compute ceiling, not DRAM
};

// Prints the report (JSON with the json option); returns the exit status.
int run_kernels_bench(const KernelsBenchOptions& options);

}  // namespace stoa::bench
