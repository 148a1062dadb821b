// `stoa experiment mismatch`: the behaviour/target mismatch DPPO has to absorb from the workers'
// precision. Episodes sampled with int8 and with f32 weights (same questions, same seeds), every
// sampled token scored by the trainer's f32 policy; TV/KL and the fraction DPPO would mask.
#pragma once
#include <cstdint>
#include <string>

#include "app/demo/demo_rl.h"

namespace stoa::app {

struct MismatchOptions {
  std::string model;
  std::string data;
  std::string index;  // default <data>/index
  std::string split = "train";
  int64_t limit = 100;
  double temperature = 1.0;
  uint64_t seed = 1;
  EpisodeLimits episode;  // the demo's RL episode limits
  int threads = 1;
  std::string out = "stoa-mismatch";
};

// Writes <out>/mismatch.json and mismatch.md. Exit status 0; errors throw stoa::Error.
int run_mismatch(const MismatchOptions& options);

}  // namespace stoa::app
