// `stoa bench pulse`: PULSE on real training steps.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace stoa::bench {

struct PulseTrainBenchOptions {
  std::string arch = "qwen3";
  std::string size = "100m";
  std::vector<double> lrs = {1e-6, 3e-6, 1e-5};
  std::vector<int> steps = {1, 4, 16};
  int64_t seq_len = 128;
  int64_t batch = 4;
  int64_t prompt_tokens = 16;
  double weight_decay = 0.0;
  int threads = 0;
  std::string device = "cpu";
  uint64_t seed = 1234;
  std::string coding = "shuffled";
  bool codings = false;
  bool json = false;
};

// Prints the report (JSON with the json option); returns the exit status.
int run_pulse_train_bench(const PulseTrainBenchOptions& options);

}  // namespace stoa::bench
