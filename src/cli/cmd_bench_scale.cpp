// `stoa bench scale`: the seed's model at int8 size end to end (bench/scale_bench.h).
#include <memory>

#include "bench/scale_bench.h"
#include "cli/command.h"

namespace stoa::cli {
namespace {

CommandRegistration bench_cmd(
    "bench scale",
    "Make the int8 model, publish it from a loopback hub to a worker process, one PULSE "
    "version, a resumed download: peak RSS and seconds per phase",
    [](CLI::App& app) {
      auto opts = std::make_shared<bench::ScaleBenchOptions>();
      app.add_option("--preset", opts->preset, "model preset")->capture_default_str();
      app.add_option("--layers", opts->layers,
                     "only the preset's first N layers (a cut: CI-sized runs)");
      app.add_option("--workdir", opts->workdir,
                     "model, blobs and spools (default ./.stoa-bench-scale-<random>; the 8B "
                     "preset needs ~27 GB of disk there)");
      app.add_flag("--keep", opts->keep, "keep the work directory");
      app.add_option("--threads", opts->threads, "the worker's engine threads")
          ->capture_default_str();
      app.add_option("--tokens", opts->tokens, "new tokens per rollout")->capture_default_str();
      app.add_option("--lr", opts->lr, "the simulated AdamW step")->capture_default_str();
      app.add_option("--cut-mb", opts->cut_mb, "the proxy cuts each connection after this many MB")
          ->capture_default_str();
      app.add_option("--timeout", opts->timeout_s, "seconds to wait for each worker event")
          ->capture_default_str();
      app.add_flag("--no-worker{false}", opts->worker,
                   "no worker process (its phases are null): the model, the anchor, the PULSE "
                   "make and the download only");
      app.add_flag("--json", opts->json, "print JSON");
      return [opts] { return bench::run_scale_bench(*opts); };
    });

}  // namespace
}  // namespace stoa::cli
