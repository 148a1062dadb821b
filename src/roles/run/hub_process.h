// The hub of a run config with everything it serves — the task, the prompts, the run's model
// files, replay verification, the HTTP(S) server and <run dir>/hub.json — shared by the two ways
// to run it: with the trainer in the same process (`stoa run`, hub_and_trainer.h) and alone on
// an internet-facing machine while the trainer dials in (`stoa hub --config`, hub_only.h).
#pragma once
#include <atomic>
#include <map>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "model/config.h"
#include "roles/run/run_config.h"

namespace stoa::env {
class Task;
class TokenCodec;
}  // namespace stoa::env
namespace stoa::pulse {
class BlobStore;
}
namespace stoa::verify {
class VersionStates;
class ReplayValidator;
class HubValidator;
class QueueValidator;
}  // namespace stoa::verify

namespace stoa::run {

class HubProcess {
 public:
  // Builds the hub of `config` (its ledger restored) and its validators; serves nothing yet.
  // `serve_trainer`: the trainer routes are open (a trainer away from the hub).
  HubProcess(const RunConfig& config, bool serve_trainer);
  ~HubProcess();  // stop()
  HubProcess(const HubProcess&) = delete;
  HubProcess& operator=(const HubProcess&) = delete;

  hub::Hub& hub() { return *hub_; }
  pulse::BlobStore& store() { return *store_; }
  const ModelConfig& model_config() const { return model_config_; }

  // Serves (TLS off loopback) on [hub] port — with 0, on the port of the run's first start
  // (hub_port.h: the join strings survive restarts; kIo naming it when it is taken) —, prints the
  // URL and join string(s) and writes <run dir>/hub.json:
  // url, port, pid, join (workers) and, with the trainer routes open, trainer_join (the trainer's
  // token: `stoa train --hub`), with the fields of `info` added. `who` starts the printed lines.
  void serve(const nlohmann::json& info, const std::string& who);
  // Stops intake, serving and the validators and removes hub.json.
  void stop();

 private:
  RunConfig config_;
  ModelConfig model_config_;
  std::string hub_json_;
  std::unique_ptr<env::TokenCodec> codec_;
  std::unique_ptr<env::Task> task_;
  std::unique_ptr<pulse::BlobStore> store_, run_files_store_;
  std::unique_ptr<hub::Hub> hub_;
  std::unique_ptr<verify::VersionStates> states_;
  std::unique_ptr<verify::ReplayValidator> validator_;
  std::unique_ptr<verify::HubValidator> hub_validator_;
  // [verify] remote: jobs wait in a queue that `stoa validate` processes (and the hub's own
  // thread, with threads >= 1) lease from.
  std::unique_ptr<hub::ValidationQueue> validation_queue_;
  std::unique_ptr<verify::QueueValidator> queue_validator_;
  std::unique_ptr<hub::HubServer> server_;
  bool stopped_ = false;
};

// The run reached its last step (max_steps here, or the remote trainer said so): the hub says so
// to every worker at its next lease or heartbeat and keeps serving until each worker heard from
// recently was told — or a heartbeat interval (every live worker beats twice in one) — so none
// is left retrying a hub that vanished. A signal's stop is not an end: the operator may start
// the run again.
void tell_workers_the_run_ended(hub::Hub& hub, int heartbeat_interval_s,
                                const std::atomic<bool>& stop);

// Reads <run dir>/trainer_token when [hub] trainer_token is unset ("" when neither exists).
std::string trainer_token_of(const RunConfig& config);

// The one JSON line a run's process prints on a clean exit: steps, version, groups dropped stale
// and `counters` (the hub's, or the remote trainer's).
void print_run_summary(const trainer::TrainerLoop& loop,
                       const std::map<std::string, double>& counters);

}  // namespace stoa::run
