// The hub and the trainer in one process (`stoa run --config run.toml`, `stoa train --config`). The
// HTTP hub (leases, intake into the SQLite ledger, blobs, long-polls) serves workers on its own
// threads while the trainer loop takes complete groups from the same ledger, trains, and publishes
// versions. A restart with the same config resumes: the ledger keeps every acknowledged rollout and
// which groups were trained; the trainer resumes from its checkpoint
// (roles/trainer/trainer_loop.h). SIGINT / SIGTERM stop it cleanly after the current step.
#include "roles/run/hub_and_trainer.h"

#include <atomic>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/log.h"
#include "env/dataset.h"
#include "env/model_codec.h"
#include "env/tasks/builtin_tasks.h"
#include "env/token_codec.h"
#include "model/weights.h"
#include "pulse/blob_store.h"
#include "roles/hub/hub.h"
#include "roles/hub/run_files.h"
#include "roles/hub/server.h"
#include "roles/hub/tls_identity.h"
#include "roles/run/run_config.h"
#include "roles/trainer/trainer_loop.h"
#include "roles/verify/hub_validator.h"

namespace stoa::run {
namespace {

std::atomic<bool> g_stop{false};
void stop_run_on_signal(int) {
  g_stop.store(true);
}

}  // namespace

// Exit status: 0 stopped cleanly (signal or max_steps), 1 any error (message on stderr).
int run_hub_and_trainer(const std::string& config_path, int64_t max_steps,
                        std::shared_ptr<train::Communicator> ranks) {
  // Before anything slow (model load, the first publish): a supervisor's SIGTERM during start-up
  // must also end in a clean exit. SIGPIPE: a worker that hangs up mid-response (TLS writes can
  // raise it) must not kill the hub.
  std::signal(SIGINT, stop_run_on_signal);
  std::signal(SIGTERM, stop_run_on_signal);
  std::signal(SIGPIPE, SIG_IGN);
  RunConfig c = load_run_config(config_path);
  if (max_steps >= 0) c.loop.max_steps = max_steps;
  c.loop.ranks = std::move(ranks);
  std::filesystem::create_directories(c.run_dir);
  // hub.json exists exactly while this process serves (a kill -9 leaves it behind, but with
  // the dead pid in it): a stale one from the previous run must not send a supervisor to a
  // port that is not listening yet.
  const std::string hub_json = c.run_dir + "/hub.json";
  std::filesystem::remove(hub_json);

  ModelWeights initial = load_model_dir(c.model_dir);
  // The workers' rule (env/model_codec.h): prompts, decoding and the ids a replay samples from.
  env::ModelCodec model_codec = env::load_model_codec(c.model_dir, initial.config, "run");
  const std::unique_ptr<env::TokenCodec> codec = std::move(model_codec.codec);
  const int64_t sample_vocab = model_codec.sample_vocab;
  // The task the run names; workers and validators build the same one from the join reply's
  // name and the run's share of its options.
  const std::unique_ptr<env::Task> task = env::make_task(c.task, c.task_options);
  pulse::BlobStore store(c.run_dir + "/blobs");
  pulse::BlobStore run_files_store(c.run_dir + "/files");

  hub::HubDeps deps;
  deps.task = task.get();
  deps.task_options = env::builtin_tasks().run_options(c.task, c.task_options);
  deps.codec = codec.get();
  deps.vocab_size = initial.config.vocab_size;
  deps.prompts = env::load_qa(c.data_dir + "/train.jsonl", env::BadLinePolicy::kFatal);
  for (const auto& q : deps.prompts) {
    STOA_CHECK(q.split.empty() || q.split == "train", ErrorKind::kInvalidArgument,
               "run: ", c.data_dir, "/train.jsonl holds item '", q.id, "' of split '", q.split,
               "'");
  }
  deps.store = &store;
  deps.run_files_store = &run_files_store;
  deps.run_files = hub::publish_run_files(c.model_dir, run_files_store);
  if (c.train.max_sequence_tokens == 0) c.train.max_sequence_tokens = c.hub.max_tokens;

  hub::Hub hub(c.hub, deps);
  // Replay verification on the hub's spare threads ([verify] enabled).
  const ModelConfig model_config = initial.config;
  std::unique_ptr<verify::VersionStates> states;
  std::unique_ptr<verify::ReplayValidator> validator;
  std::unique_ptr<verify::HubValidator> hub_validator;
  // [verify] remote: jobs wait in a queue that `stoa validate` processes (and the hub's own
  // thread, with threads >= 1) lease from.
  std::unique_ptr<hub::ValidationQueue> validation_queue;
  std::unique_ptr<verify::QueueValidator> queue_validator;
  auto record = [&hub](const std::string& id, const hub::AuditVerdict& v) {
    hub.record_verdict(id, v);
  };
  if (c.hub.verify.enabled && c.hub.verify.remote) {
    validation_queue =
        std::make_unique<hub::ValidationQueue>(c.hub.verify.max_queue, c.hub.verify.job_lease_ms);
    hub.set_auditor(validation_queue.get());
  }
  if (c.hub.verify.enabled && c.hub.verify.threads > 0) {
    verify::ReplaySettings rs;
    rs.sampling = c.hub.sampling;
    rs.sample_vocab = sample_vocab;
    if (model_config.eos_token_id >= 0)
      rs.stop_tokens = {static_cast<int32_t>(model_config.eos_token_id)};
    rs.capacity = c.hub.max_tokens;
    states = std::make_unique<verify::VersionStates>(store);
    validator = std::make_unique<verify::ReplayValidator>(model_config, *task, *codec, rs, *states,
                                                          c.hub.verify.threads);
    if (validation_queue) {
      queue_validator =
          std::make_unique<verify::QueueValidator>(*validator, *validation_queue, record);
    } else {
      hub_validator =
          std::make_unique<verify::HubValidator>(*validator, record, c.hub.verify.max_queue);
      hub.set_auditor(hub_validator.get());
    }
  }
  trainer::TrainerLoop loop(hub, store, initial, c.train, c.loop);
  initial = ModelWeights();
  loop.start();  // a version exists before any worker can lease
  // Off loopback the hub serves TLS: a configured certificate or a self-signed one in the run dir.
  const std::string cert_sha256 = hub::default_tls(c.server, c.run_dir + "/tls");
  hub::HubServer server(hub, c.server);
  server.set_validation_queue(validation_queue.get());
  server.start();
  const std::string join = hub::hub_join_string(server, c.server, c.hub.join_token, cert_sha256);
  {
    nlohmann::json info = {{"url", server.url()},
                           {"port", server.port()},
                           {"pid", static_cast<int64_t>(::getpid())},
                           {"version", loop.version()},
                           {"resumed", loop.resumed()},
                           {"last_step", loop.last_step()},
                           {"join", join}};
    // Written whole, then renamed: a supervisor polling for the file never reads half of it.
    {
      std::ofstream out(hub_json + ".tmp");
      out << info.dump() << '\n';
      STOA_CHECK(out.good(), ErrorKind::kIo, "run: cannot write ", hub_json, ".tmp");
    }
    std::filesystem::rename(hub_json + ".tmp", hub_json);
    std::printf("stoa run: hub at %s, version %llu%s\n", server.url().c_str(),
                static_cast<unsigned long long>(loop.version()),
                loop.resumed() ? " (resumed from checkpoint)" : "");
    std::printf("stoa run: join string: %s\n", join.c_str());
    std::fflush(stdout);
  }
  loop.run(g_stop);
  log_info("run", "stopping after step ", loop.last_step(), ", version ", loop.version());
  hub.stop();
  server.stop();
  hub_validator.reset();  // no intake any more; its thread hands verdicts to the hub
  if (validation_queue) validation_queue->stop();
  queue_validator.reset();
  std::filesystem::remove(hub_json);
  nlohmann::json summary = {{"steps", loop.last_step()},
                            {"version", loop.version()},
                            {"groups_dropped_stale", loop.groups_dropped()}};
  for (const auto& [k, v] : hub.counters()) summary["counters"][k] = v;
  std::printf("%s\n", summary.dump().c_str());
  return 0;
}

}  // namespace stoa::run
