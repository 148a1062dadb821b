// One PULSE version of a model too large for f32 masters on this machine, made the way the
// trainer makes it (pulse/version_maker.h): tensor by tensor from the int8 view, here read
// streaming from the anchor file. The trainer's masters are simulated per tensor: a master is
// its int8 value plus a deterministic sub-grid offset in (-1/2, 1/2) of its scale (what the
// int8 view forgot; bf16 tensors likewise within half an ulp, f32 tensors exactly), so the
// view quantises back to itself; then one AdamW step from a fresh optimiser — whose normalised
// step is lr * sign(g) — with a pseudo-random gradient sign and decoupled weight decay.
#pragma once
#include <cstdint>
#include <string>

#include "core/hash.h"
#include "pulse/patch.h"
#include "pulse/version_maker.h"

namespace stoa::bench {

struct SimulatedVersionOptions {
  double lr = 2e-6;
  double weight_decay = 0.01;
  uint64_t seed = 1;
};

struct SimulatedVersion {
  pulse::Patch patch;
  pulse::VersionMakeStats stats;
  // CPU seconds of this thread in the maker (quantise on the frozen grid, diff, write the view,
  // hash the touched tensors): the trainer's cost. The anchor decode and the master simulation
  // are not part of it (a trainer holds its view and masters in memory).
  double make_cpu_seconds = 0;
  double simulate_cpu_seconds = 0;  // the simulated masters and AdamW step
  double wall_seconds = 0;          // everything, the anchor read included
};

// Reads the anchor at `anchor_path` (version `from`) tensor by tensor and makes the patch to
// from + 1.
SimulatedVersion make_simulated_version(const std::string& anchor_path,
                                        const SimulatedVersionOptions& options);

// CPU seconds of the calling thread.
double thread_cpu_seconds();

}  // namespace stoa::bench
