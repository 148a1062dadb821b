// `stoa demo`: the project's main job, offline on one machine — data, index, tokenizer and model
// (demo_setup.h), an SFT warm start, pass@1 before, asynchronous RL with `stoa run` and N
// `stoa work` processes (demo_rl.h), pass@1 after; the summary printed as JSON.
#pragma once
#include <cstdint>
#include <string>

#include "app/demo/demo_rl.h"
#include "app/demo/demo_setup.h"

namespace stoa::app {

struct DemoOptions {
  DemoSetupOptions setup;
  RlOptions rl;
  bool full = false;   // the long run (apply_full_setup, >= 24 RL minutes, every question)
  bool fresh = false;  // delete setup.dir first
  int64_t eval_limit = 400;
  std::string json_summary;         // also write the summary here
  std::string warm_start = "auto";  // auto, none, or a model directory
};

// SIGINT / SIGTERM end the RL phase early and still report. Exit status 0; errors throw.
int run_demo(DemoOptions options);

}  // namespace stoa::app
