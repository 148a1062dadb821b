// The hub + asynchronous DPPO trainer of a TOML run config, in this process (cmd_torch_run.cpp):
// shared by `stoa run --config` and `stoa train --config`, the name the brief gives the same job.
#pragma once
#include <cstdint>
#include <string>

namespace stoa::cli {

// Exit status: 0 stopped cleanly (signal or max_steps); errors propagate as stoa::Error.
int run_hub_and_trainer(const std::string& config, int64_t max_steps);

}  // namespace stoa::cli
