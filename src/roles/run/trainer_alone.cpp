// `stoa train --config run.toml --hub STRING`: the trainer dialing out to a hub elsewhere
// (split_run.h).
#include <cstdio>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/log.h"
#include "model/weights.h"
#include "net/join_string.h"
#include "pulse/blob_store.h"
#include "roles/run/hub_process.h"
#include "roles/run/run_config.h"
#include "roles/run/split_run.h"
#include "roles/run/stop_signals.h"
#include "roles/trainer/remote_port.h"
#include "roles/trainer/trainer_loop.h"

namespace stoa::run {

int run_trainer_alone(const std::string& config_path, const std::string& hub_spec,
                      int64_t max_steps, std::shared_ptr<train::Communicator> ranks,
                      const HeldOutEvalOf& held_out_eval) {
  const std::atomic<bool>& stop = stop_on_signals();
  RunConfig c = training_run_config(config_path, max_steps, std::move(ranks), held_out_eval);

  trainer::RemotePortOptions o;
  const net::JoinString j = net::parse_join_string_or_url(hub_spec);
  o.hub_url = j.url;
  o.token = j.token;
  o.pin_sha256 = j.sha256;
  if (o.token.empty()) {  // a bare URL: the token and the trust from the run config
    o.token = trainer_token_of(c);
    STOA_CHECK(!o.token.empty(), ErrorKind::kInvalidArgument, "stoa train --hub ", hub_spec,
               ": no trainer token: give the trainer join string `stoa hub` prints (hub.json: "
               "\"trainer_join\"), or set [hub] trainer_token in ",
               config_path);
    if (!c.server.tls_cert_path.empty()) o.ca_file = c.server.tls_cert_path;
  }
  // The trainer's own PULSE store (its int8 view's durable copy): apart from the hub's blobs,
  // which may sit in the same run dir when both run on one machine.
  std::filesystem::create_directories(c.run_dir);
  pulse::BlobStore store(c.run_dir + "/trainer/blobs");
  trainer::RemoteTrainerPort port(o, store, stop);
  ModelWeights initial = load_model_dir(c.model_dir);
  trainer::TrainerLoop loop(port, store, initial, c.train, c.loop);
  initial = ModelWeights();
  loop.start();
  std::printf("stoa train: training for the hub at %s, version %llu%s\n", o.hub_url.c_str(),
              static_cast<unsigned long long>(loop.version()),
              loop.resumed() ? " (resumed from checkpoint)" : "");
  std::fflush(stdout);
  try {
    loop.run(stop);
  } catch (const Error& e) {
    // A signal while the hub was away ends the retries of the call in flight: a clean stop
    // (that step's groups stay open in the ledger and its update is lost, never trained twice).
    if (!stop.load()) throw;
    log_warn("train", "stopped while waiting for the hub: ", e.what());
  }
  // max_steps reached (a signal is no end: the run may go on): the hub ends the run too.
  if (!stop.load()) port.finish_run();
  log_info("train", "stopping after step ", loop.last_step(), ", version ", loop.version());
  print_run_summary(loop, port.counters());
  return 0;
}

}  // namespace stoa::run
