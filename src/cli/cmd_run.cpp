// `stoa run --config run.toml`: the hub and the trainer in one process
// (roles/run/hub_and_trainer.h).
#include <cstdint>
#include <memory>
#include <string>

#include "cli/command.h"
#include "roles/run/hub_and_trainer.h"

namespace stoa::cli {
namespace {

struct Options {
  std::string config;
  int64_t max_steps = -1;  // overrides [run] max_steps when >= 0
};

CommandRegistration run_cmd("run", "Hub + asynchronous DPPO trainer from a TOML run config",
                            [](CLI::App& app) {
                              auto o = std::make_shared<Options>();
                              app.add_option("--config", o->config, "run.toml")->required();
                              app.add_option("--max-steps", o->max_steps,
                                             "stop after this many ledger steps (overrides the "
                                             "config)");
                              return
                                  [o] { return run::run_hub_and_trainer(o->config, o->max_steps); };
                            });

}  // namespace
}  // namespace stoa::cli
