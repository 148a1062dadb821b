// The hub and the trainer in one process (`stoa run --config run.toml`, `stoa train --config`). The
// HTTP hub (leases, intake into the SQLite ledger, blobs, long-polls) serves workers on its own
// threads while the trainer loop takes complete groups from the same ledger, trains, and publishes
// versions. A restart with the same config resumes: the ledger keeps every acknowledged rollout and
// which groups were trained; the trainer resumes from its checkpoint
// (roles/trainer/trainer_loop.h). SIGINT / SIGTERM stop it cleanly after the current step.
#include "roles/run/hub_and_trainer.h"

#include <atomic>
#include <cstdio>
#include <memory>

#include <nlohmann/json.hpp>

#include "core/log.h"
#include "model/weights.h"
#include "roles/hub/hub.h"
#include "roles/run/hub_process.h"
#include "roles/run/run_config.h"
#include "roles/run/run_config_lora.h"
#include "roles/run/stop_signals.h"
#include "roles/trainer/trainer_loop.h"
#include "train/distributed.h"

namespace stoa::run {
RunConfig training_run_config(const std::string& config_path, int64_t max_steps,
                              std::shared_ptr<train::Communicator> ranks,
                              const HeldOutEvalOf& held_out_eval) {
  RunConfig c = load_run_config(config_path);
  if (max_steps >= 0) c.loop.max_steps = max_steps;
  c.loop.ranks = std::move(ranks);
  check_lora_run(c.train, c.model_dir);
  if (c.train.max_sequence_tokens == 0) c.train.max_sequence_tokens = c.hub.max_tokens;
  if (held_out_eval) c.loop.eval = held_out_eval(c);
  return c;
}

// Exit status: 0 stopped cleanly (signal or max_steps), 1 any error (message on stderr).
int run_hub_and_trainer(const std::string& config_path, int64_t max_steps,
                        std::shared_ptr<train::Communicator> ranks,
                        const HeldOutEvalOf& held_out_eval) {
  const std::atomic<bool>& stop = stop_on_signals();
  RunConfig c = training_run_config(config_path, max_steps, std::move(ranks), held_out_eval);

  HubProcess process(c, /*serve_trainer=*/false);
  hub::Hub& hub = process.hub();
  ModelWeights initial = load_model_dir(c.model_dir);
  trainer::TrainerLoop loop(hub, process.store(), initial, c.train, c.loop);
  initial = ModelWeights();
  loop.start();  // a version exists before any worker can lease
  process.serve(
      {{"version", loop.version()}, {"resumed", loop.resumed()}, {"last_step", loop.last_step()}},
      "stoa run");
  loop.run(stop);
  log_info("run", "stopping after step ", loop.last_step(), ", version ", loop.version());
  if (!stop) tell_workers_the_run_ended(hub, c.hub.heartbeat_interval_s, stop);
  process.stop();
  print_run_summary(loop, hub.counters());
  return 0;
}

}  // namespace stoa::run
