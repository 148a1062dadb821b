// The hub + asynchronous DPPO trainer of a TOML run config, in this process: `stoa run --config`
// and `stoa train --config` (the same job under the name the trainer's users look for).
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "train/distributed.h"

namespace stoa::run {

// Exit status: 0 stopped cleanly (signal or max_steps); errors propagate as stoa::Error.
// SIGINT / SIGTERM stop it after the current step; max_steps >= 0 overrides [run] max_steps.
// `ranks`: rank 0 of a data-parallel trainer (`stoa train --nproc N`); the other ranks run
// train::Trainer::follow.
int run_hub_and_trainer(const std::string& config_path, int64_t max_steps,
                        std::shared_ptr<train::Communicator> ranks = nullptr);

}  // namespace stoa::run
