// `stoa bench pulse-sim`: PULSE patch sizes on simulated AdamW training (bench/pulse_sim_bench.h).
#include <memory>

#include "bench/pulse_sim_bench.h"
#include "cli/command.h"

namespace stoa::cli {
namespace {

CommandRegistration reg(
    "bench pulse-sim", "PULSE patch size/speed on simulated AdamW steps (no trainer needed)",
    [](CLI::App& app) {
      auto opts = std::make_shared<bench::PulseSimBenchOptions>();
      app.add_flag("--json", opts->json, "print the JSON report");
      app.add_option("--layout", opts->layout, "100m (default) or tiny");
      app.add_option("--lr", opts->lrs, "learning rates")->delimiter(',');
      app.add_option("--steps", opts->steps, "step counts to measure after")->delimiter(',');
      app.add_option("--seed", opts->seed, "simulation seed");
      app.add_option("--zstd-level", opts->zstd_level, "zstd level");
      return [opts] { return bench::run_pulse_sim_bench(*opts); };
    });

}  // namespace
}  // namespace stoa::cli
