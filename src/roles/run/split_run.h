// A run split over two machines: the hub alone on a small internet-facing machine
// (`stoa hub --config run.toml`) and the trainer on a GPU box behind NAT that dials out to it
// (`stoa train --config run.toml --hub STRING`; roles/trainer/remote_port.h). Both read the same
// run config; `stoa run` (both in one process, hub_and_trainer.h) stays the default. Either side
// restarts without losing anything: the hub keeps the ledger, the blobs and the catalog; the
// trainer keeps its checkpoint and its own PULSE store, and continues the published int8 view
// with patches.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "roles/run/hub_and_trainer.h"
#include "train/distributed.h"

namespace stoa::run {

// Serves workers, validators and one trainer until SIGINT / SIGTERM, or until the trainer reports
// the run's last step (then the workers are told the run ended, as by `stoa run`). Exit status 0.
int run_hub_alone(const std::string& config_path);

// `hub`: the trainer join string `stoa hub` prints and writes to hub.json ("trainer_join": URL,
// trainer token, certificate fingerprint), or the hub's URL with the token from [hub]
// trainer_token or <run dir>/trainer_token. max_steps >= 0 overrides [run] max_steps; `ranks` as
// for run_hub_and_trainer. Exit status 0 when stopped (signal or max_steps: then the hub is told
// the run is finished and stops too); errors propagate.
// `held_out_eval` as for run_hub_and_trainer: the evaluation runs on the trainer's machine.
int run_trainer_alone(const std::string& config_path, const std::string& hub, int64_t max_steps,
                      std::shared_ptr<train::Communicator> ranks = nullptr,
                      const HeldOutEvalOf& held_out_eval = {});

}  // namespace stoa::run
