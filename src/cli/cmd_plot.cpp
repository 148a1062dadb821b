// `stoa plot`: PNG charts from run logs (app/plot/plot.h). Torch-free: it only reads files, so it
// is in every build.
#include <memory>

#include "app/plot/plot.h"
#include "cli/command.h"

namespace stoa::cli {
namespace {

CommandRegistration plot_cmd(
    "plot", "PNG charts (pass@1, reward, masking, TV/KL, staleness, patch bytes) from run logs",
    [](CLI::App& app) {
      auto o = std::make_shared<app::PlotOptions>();
      app.add_option("--run", o->runs,
                     "run directory (steps.jsonl) or demo directory (run/steps.jsonl, "
                     "logs/eval-*.json); repeat for several runs in one chart")
          ->required();
      app.add_option("--label", o->labels, "chart label of the n-th --run (default: its name)");
      app.add_option("--out", o->out, "output directory for PNGs, data files and plot.gp")
          ->required();
      app.add_option("--gnuplot", o->gnuplot, "gnuplot executable (default: gnuplot on PATH)");
      return [o] { return app::plot_runs(*o); };
    });

}  // namespace
}  // namespace stoa::cli
