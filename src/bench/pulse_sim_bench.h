// `stoa bench pulse-sim`: PULSE on simulated AdamW training.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace stoa::bench {

struct PulseSimBenchOptions {
  bool json = false;
  std::string layout = "100m";
  std::vector<double> lrs = {1e-6, 3e-6, 1e-5};
  std::vector<int> steps = {1, 4, 16};
  uint64_t seed = 2026;
  int zstd_level = 1;
};

// Prints the report (JSON with the json option); returns the exit status.
int run_pulse_sim_bench(const PulseSimBenchOptions& options);

}  // namespace stoa::bench
