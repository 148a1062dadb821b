// `stoa run --config run.toml`: the hub and the trainer in one process
// (roles/run/hub_and_trainer.h); `stoa hub --config run.toml`: the hub alone, for a trainer that
// dials in with `stoa train --config run.toml --hub STRING` (roles/run/split_run.h).
#include <cstdint>
#include <memory>
#include <string>

#include "app/eval/run_eval.h"
#include "cli/command.h"
#include "core/error.h"
#include "roles/run/hub_and_trainer.h"
#include "roles/run/run_log.h"
#include "roles/run/split_run.h"

namespace stoa::cli {
namespace {

struct Options {
  std::string config;
  int64_t max_steps = -1;  // overrides [run] max_steps when >= 0
};

CommandRegistration run_cmd(
    "run", "Hub + asynchronous DPPO trainer from a TOML run config", [](CLI::App& app) {
      auto o = std::make_shared<Options>();
      app.add_option("--config", o->config, "run.toml")->required();
      app.add_option("--max-steps", o->max_steps,
                     "stop after this many ledger steps (overrides the "
                     "config)");
      return [o] {
        run::open_run_log(run::load_run_config(o->config), "run", o->config);
        return run::run_hub_and_trainer(o->config, o->max_steps, nullptr, app::held_out_eval);
      };
    });

CommandRegistration hub_cmd(
    "hub",
    "The hub of a run config alone (workers, validators and a trainer that dials in with "
    "`stoa train --hub`); `stoa hub token ...` manages its join tokens",
    [](CLI::App& app) {
      auto o = std::make_shared<Options>();
      // Not required by the parser: `stoa hub token add` parses this command too.
      app.add_option("--config", o->config, "run.toml");
      return [o] {
        STOA_CHECK(!o->config.empty(), ErrorKind::kInvalidArgument,
                   "stoa hub: give --config run.toml (or a subcommand: stoa hub token ...)");
        run::open_run_log(run::load_run_config(o->config), "hub", o->config);
        return run::run_hub_alone(o->config);
      };
    });

}  // namespace
}  // namespace stoa::cli
