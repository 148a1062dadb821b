// `stoa bench fleet`: hub + trainer + workers on loopback and behind emulated home links
// (app/fleet/fleet_bench.h). Needs the trainer.
#include <memory>

#include "app/fleet/fleet_bench.h"
#include "cli/command.h"

namespace stoa::cli {
namespace {

CommandRegistration reg(
    "bench fleet",
    "Hub + trainer + workers on loopback and behind emulated home links, with PULSE patches and "
    "with full int8 weights: busy/idle fractions, weight-sync latency, rollouts/s, bytes",
    [](CLI::App& app) {
      auto o = std::make_shared<app::FleetBenchOptions>();
      app.add_option("--seconds", o->seconds, "measured window per configuration")
          ->capture_default_str();
      app.add_option("--workers", o->workers, "stoa work processes")->capture_default_str();
      app.add_option("--worker-threads", o->worker_threads, "engine threads per worker")
          ->capture_default_str();
      app.add_option("--slots", o->slots, "rollouts each worker generates together")
          ->capture_default_str();
      app.add_option("--trainer-threads", o->trainer_threads, "libtorch threads of the trainer")
          ->capture_default_str();
      app.add_option("--dir", o->dir, "work directory (kept; default a temporary one, removed)");
      app.add_option("--assets", o->assets,
                     "directory with data/, data/index/ and model/ (made there if missing)");
      app.add_option("--preset", o->preset,
                     "model preset (stoa model init --list) instead of the bench's own ~4.8M "
                     "parameter LFM2");
      app.add_option("--rate-mbit", o->rate_mbit, "home link rate, each way")
          ->capture_default_str();
      app.add_option("--rtt-ms", o->rtt_ms, "home link round trip")->capture_default_str();
      app.add_option("--configs", o->configs, "comma-separated subset to run")
          ->capture_default_str();
      app.add_flag("--json", o->json_out, "print one JSON document");
      app.add_flag("--keep", o->keep, "keep the temporary work directory");
      return [o] { return app::run_fleet_bench(*o); };
    });

}  // namespace
}  // namespace stoa::cli
