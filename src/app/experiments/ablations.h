// `stoa experiment ablations`: what each mechanism contributes. From one SFT warm start (the
// demo's), one RL phase per variant — loss, staleness bound, PULSE vs full sync, int8 vs f32 —
// with the same seeds and wall-clock budget; each evaluated, a table written.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "app/demo/demo_rl.h"
#include "app/demo/demo_setup.h"

namespace stoa::app {

struct AblationsOptions {
  DemoSetupOptions setup;
  RlOptions rl;
  int64_t eval_limit = 400;
  std::vector<std::string> only;    // variant names (and "int8-vs-f32"); empty = all
  int64_t mismatch_episodes = 100;  // per precision, for int8-vs-f32
  bool full_setup = false;          // `stoa demo --full`'s warm start
  std::string json_out;
};

// SIGINT / SIGTERM end the current phase early. Exit status 0; errors throw stoa::Error.
int run_ablations(AblationsOptions options);

}  // namespace stoa::app
