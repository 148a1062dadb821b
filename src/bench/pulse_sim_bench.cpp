// `stoa bench pulse-sim [--json] [--layout 100m|tiny] [--lr A,B] [--steps 1,4] [--seed N]`
//
// The PULSE bench without the trainer: simulated AdamW steps (pulse/adam_sim.h) on a Qwen3-shaped
// model, measured by pulse::run_simulated_pulse_bench exactly like `stoa bench pulse` measures real
// AdamW snapshots (patch bytes beside full int8 / bf16 / XOR+zstd, encode/apply speed,
// bit-exactness). Torch-free, so any build (a worker machine, CI) can reproduce the figures.
// Defaults (100m, lr 1e-6,3e-6,1e-5, steps 1,4,16) take ~1 min on the shared 2-core box.
#include "bench/pulse_sim_bench.h"

#include <cstdio>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/pulse_bench.h"
#include "core/error.h"

namespace stoa::bench {
int run_pulse_sim_bench(const PulseSimBenchOptions& o) {
  pulse::SimLayout layout;
  if (o.layout == "100m") {
    layout = pulse::sim_layout_100m();
  } else if (o.layout == "tiny") {
    layout = pulse::sim_layout_tiny();
  } else {
    fail(ErrorKind::kInvalidArgument, "bench pulse-sim: --layout must be 100m or tiny, got '",
         o.layout, "'");
  }
  STOA_CHECK(!o.lrs.empty() && !o.steps.empty(), ErrorKind::kInvalidArgument,
             "bench pulse-sim: --lr and --steps need at least one value each");
  for (int s : o.steps)
    STOA_CHECK(s >= 1, ErrorKind::kInvalidArgument, "bench pulse-sim: --steps must be >= 1, got ",
               s);
  pulse::PulseBenchOptions options;
  options.zstd_level = o.zstd_level;
  nlohmann::json json;
  std::vector<pulse::PulseBenchRun> runs =
      pulse::run_simulated_pulse_bench(layout, o.lrs, o.steps, o.seed, options, &json);
  if (o.json) {
    std::cout << json.dump(2) << "\n";
    return 0;
  }
  std::cout << "lr        steps  changed   patch_B     full_int8_B  xor_zstd_B  bitexact\n";
  for (const pulse::PulseBenchRun& r : runs) {
    std::printf("%-9.2g %5d  %7.4f%%  %-10llu  %-11llu  %-10llu  %s\n", r.lr, r.steps,
                100.0 * r.changed_fraction, static_cast<unsigned long long>(r.patch_bytes),
                static_cast<unsigned long long>(r.full_int8_bytes),
                static_cast<unsigned long long>(r.xor_zstd_bytes), r.bitexact ? "yes" : "NO");
  }
  return 0;
}

}  // namespace stoa::bench
