// `stoa bench fleet`: the same short asynchronous RL run — `stoa run` (hub + trainer) and N
// `stoa work` processes — in up to four configurations side by side (plain loopback or emulated
// home links; PULSE patches or full int8 every version): the trainer's busy fraction, the
// workers' idle fraction, weight-sync latency, rollouts/s and bytes on the wire each way.
// How it is measured: fleet_bench.cpp and docs/design/fleet.md.
#pragma once
#include <string>

namespace stoa::app {

struct FleetBenchOptions {
  double seconds = 90;
  int workers = 2;
  int worker_threads = 1;
  int slots = 4;
  int trainer_threads = 1;
  std::string dir;     // work directory (default: a fresh one under /tmp)
  std::string assets;  // reuse prepared assets (data/, data/index/, model/)
  std::string preset;  // empty: the bench's own model (kFleetModelConfig)
  double rate_mbit = 50;
  double rtt_ms = 40;
  std::string configs = "loopback-pulse,loopback-int8,home-pulse,home-int8";
  bool json_out = false;
  bool keep = false;
};

// Prints a table (or one JSON document with json_out). Exit status 0; errors throw stoa::Error.
int run_fleet_bench(const FleetBenchOptions& options);

}  // namespace stoa::app
