// The hub + asynchronous DPPO trainer of a TOML run config, in this process: `stoa run --config`
// and `stoa train --config` (the same job under the name the trainer's users look for).
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "roles/trainer/held_out_eval.h"
#include "train/distributed.h"

namespace stoa::run {

struct RunConfig;
// The run's held-out evaluation ([eval]) made from its config: `stoa eval`'s evaluator, which the
// command that starts the run hands down (app/eval/run_eval.h; the run role does not see the
// application layer). Empty: [eval] is not evaluated.
using HeldOutEvalOf = std::function<trainer::HeldOutEval(const RunConfig&)>;

// The run config as the trainer of either process (this one, or `stoa train --hub`) trains it:
// max_steps >= 0 overrides [run] max_steps; the ranks and the held-out evaluation set; the
// trainer's sequence bound, unless set, the hub's max_tokens.
RunConfig training_run_config(const std::string& config_path, int64_t max_steps,
                              std::shared_ptr<train::Communicator> ranks,
                              const HeldOutEvalOf& held_out_eval);

// Exit status: 0 stopped cleanly (signal or max_steps); errors propagate as stoa::Error.
// SIGINT / SIGTERM stop it after the current step; max_steps >= 0 overrides [run] max_steps.
// `ranks`: rank 0 of a data-parallel trainer (`stoa train --nproc N`); the other ranks run
// train::Trainer::follow.
int run_hub_and_trainer(const std::string& config_path, int64_t max_steps,
                        std::shared_ptr<train::Communicator> ranks = nullptr,
                        const HeldOutEvalOf& held_out_eval = {});

}  // namespace stoa::run
