// A supervised warm start that stops at a target pass@1, so RL starts where the issue asks
// (~30 %) rather than wherever a fixed step count happens to land. Why: the `demo` model's
// pass@1 rises steeply once it learns to copy (4.5 % → 55 % over one epoch, docs/results.md),
// and where that happens moves with threads and data order, so a step count cannot aim at a
// band ten points wide.
//
// `stoa train --sft` runs as a child and writes a model snapshot every N steps. Each snapshot is
// scored — greedy pass@1 with the int8 weights a worker holds, on train questions kept out of the
// SFT data (`stoa data demos --hold-out`) — while the trainer is paused (SIGSTOP: the score gets
// both cores and the SFT's wall time stays honest). The first snapshot at or above the target
// becomes the output; if none reaches it, the SFT's final model does.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "app/demo/demo_rl.h"

namespace stoa::app {

struct SftToTargetOptions {
  // The full `stoa train --sft ... --out <out> --json` command; --snapshot-every is appended.
  std::vector<std::string> train_argv;
  std::string out;       // the model directory the SFT writes (and this leaves behind)
  std::string log_path;  // the SFT's log
  EvalRun probe;         // the held-out questions and episode limits; model/json_out are set here
  std::string probe_log_dir;  // probe-step-<N>.{json,log}
  double target = 0.3;
  int64_t snapshot_every = 200;
};

struct ProbePoint {
  int64_t step = 0;
  double pass1 = 0;
};

struct SftToTargetResult {
  bool reached = false;
  int64_t step = 0;  // the step of the chosen snapshot (0 when not reached)
  double pass1 = 0;  // its probe pass@1 (-1 when not reached: the final model is not probed)
  std::vector<ProbePoint> curve;
};

// Throws kIo if the SFT or a probe evaluation fails (naming which, with the end of its log).
SftToTargetResult sft_to_target(const SftToTargetOptions& options, const Say& say);

}  // namespace stoa::app
