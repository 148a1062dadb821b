// `stoa bench train`: tokens/s and MFU of full training steps.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "train/train_bench.h"

namespace stoa::bench {

struct TrainBenchReportOptions {
  train::TrainBenchOptions bench;
  std::string dtype = "f32";
  bool json = false;
};

// Prints the report (JSON with the json option); returns the exit status.
int run_train_bench_report(TrainBenchReportOptions options);

}  // namespace stoa::bench
