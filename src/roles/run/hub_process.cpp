// The hub of a run config and what it serves (hub_process.h).
#include "roles/run/hub_process.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <thread>

#include "core/error.h"
#include "core/log.h"
#include "env/dataset.h"
#include "env/end_of_turn.h"
#include "env/model_codec.h"
#include "env/tasks/builtin_tasks.h"
#include "env/token_codec.h"
#include "net/join_string.h"
#include "pulse/blob_store.h"
#include "roles/hub/http/server.h"
#include "roles/hub/hub.h"
#include "roles/hub/identity/tls_identity.h"
#include "roles/hub/store/run_files.h"
#include "roles/run/hub_port.h"
#include "roles/verify/hub_validator.h"

namespace stoa::run {

HubProcess::HubProcess(const RunConfig& config, bool serve_trainer)
    : config_(config), hub_json_(config.run_dir + "/hub.json") {
  RunConfig& c = config_;
  std::filesystem::create_directories(c.run_dir);
  // hub.json exists exactly while this process serves (a kill -9 leaves it behind, but with
  // the dead pid in it): a stale one from the previous run must not send a supervisor to a
  // port that is not listening yet.
  std::filesystem::remove(hub_json_);
  model_config_ = load_model_config(c.model_dir + "/config.json");
  // The workers' rule (env/model_codec.h): prompts, decoding and the ids a replay samples from.
  env::ModelCodec model_codec = env::load_model_codec(c.model_dir, model_config_, "run");
  codec_ = std::move(model_codec.codec);
  // The task the run names; workers and validators build the same one from the join reply's
  // name and the run's share of its options.
  task_ = env::make_task(c.task, c.task_options);
  // Before any worker joins: a run whose turns can never end on the template's end-of-turn token
  // would spend every response's budget to max_new_tokens (the workers use this config and codec).
  env::check_turns_end(*codec_, model_config_, task_->stop_strings(), "run");
  store_ = std::make_unique<pulse::BlobStore>(c.run_dir + "/blobs");
  run_files_store_ = std::make_unique<pulse::BlobStore>(c.run_dir + "/files");

  hub::HubDeps deps;
  deps.task = task_.get();
  deps.task_options = env::builtin_tasks().run_options(c.task, c.task_options);
  deps.codec = codec_.get();
  deps.vocab_size = model_config_.vocab_size;
  deps.model = model_config_;
  deps.prompts = env::load_qa(c.data_dir + "/train.jsonl", env::BadLinePolicy::kFatal);
  for (const auto& q : deps.prompts) {
    STOA_CHECK(q.split.empty() || q.split == "train", ErrorKind::kInvalidArgument,
               "run: ", c.data_dir, "/train.jsonl holds item '", q.id, "' of split '", q.split,
               "'");
  }
  deps.store = store_.get();
  deps.run_files_store = run_files_store_.get();
  deps.run_files = hub::publish_run_files(c.model_dir, *run_files_store_);
  hub::HubConfig hub_config = c.hub;
  hub_config.serve_trainer = serve_trainer;
  // One key ([trainer] no_signal_warn_steps) for the trainer's log and the hub's reports.
  hub_config.no_signal_warn_steps = c.loop.no_signal_warn_steps;
  hub_ = std::make_unique<hub::Hub>(hub_config, deps);

  // Replay verification on the hub's spare threads ([verify] enabled).
  auto record = [this](const std::string& id, const hub::AuditVerdict& v) {
    hub_->checks().record_verdict(id, v);
  };
  if (c.hub.verify.enabled && c.hub.verify.remote) {
    validation_queue_ =
        std::make_unique<hub::ValidationQueue>(c.hub.verify.max_queue, c.hub.verify.job_lease_ms);
    hub_->checks().set_auditor(validation_queue_.get());
  }
  if (c.hub.verify.enabled && c.hub.verify.threads > 0) {
    verify::ReplaySettings rs;
    rs.sampling = c.hub.sampling;
    rs.sample_vocab = model_codec.sample_vocab;
    if (model_config_.eos_token_id >= 0)
      rs.stop_tokens = {static_cast<int32_t>(model_config_.eos_token_id)};
    rs.capacity = c.hub.max_tokens;
    rs.backend = gpu::parse_backend_choice(c.hub.verify.backend);
    gpu::require_backend(rs.backend);  // a GPU asked for and missing stops the run here
    states_ = std::make_unique<verify::VersionStates>(*store_);
    validator_ = std::make_unique<verify::ReplayValidator>(model_config_, *task_, *codec_, rs,
                                                           *states_, c.hub.verify.threads);
    if (validation_queue_) {
      queue_validator_ =
          std::make_unique<verify::QueueValidator>(*validator_, *validation_queue_, record);
    } else {
      hub_validator_ =
          std::make_unique<verify::HubValidator>(*validator_, record, c.hub.verify.max_queue);
      hub_->checks().set_auditor(hub_validator_.get());
    }
  }
}

HubProcess::~HubProcess() {
  stop();
}

void HubProcess::serve(const nlohmann::json& info_in, const std::string& who) {
  // Off loopback the hub serves TLS: a configured certificate or a self-signed one in the run dir.
  const std::string cert_sha256 = hub::default_tls(config_.server, config_.run_dir + "/tls");
  // The port of this run's first start when the config leaves it to the system (hub_port.h):
  // the join strings handed out before a restart must still lead here after it.
  const HubPort port = hub_port_to_bind(config_);
  hub::ServerOptions server_options = config_.server;
  server_options.port = port.port;
  server_ = std::make_unique<hub::HubServer>(*hub_, server_options);
  server_->set_validation_queue(validation_queue_.get());
  try {
    server_->start();
  } catch (const Error& e) {
    if (!port.recorded || e.kind() != ErrorKind::kIo) throw;
    fail_recorded_port_taken(config_, port.port, e.what());
  }
  remember_hub_port(config_, server_->port());
  if (port.recorded)
    log_info("hub", "port ", port.port, " as at this run's first start (", hub_port_path(config_),
             ")");
  const std::string join =
      hub::hub_join_string(*server_, config_.server, config_.hub.join_token, cert_sha256);
  nlohmann::json info = info_in;
  info["url"] = server_->url();
  info["port"] = server_->port();
  info["pid"] = static_cast<int64_t>(::getpid());
  info["join"] = join;
  std::string trainer_join;
  if (hub_->config().serve_trainer) {
    trainer_join =
        hub::hub_join_string(*server_, config_.server, trainer_token_of(config_), cert_sha256);
    info["trainer_join"] = trainer_join;
  }
  // Written whole, then renamed: a supervisor polling for the file never reads half of it. Only
  // the owner may read it: it holds the join token and, with `stoa hub`, the trainer's token.
  {
    std::ofstream out(hub_json_ + ".tmp");
    out << info.dump() << '\n';
    STOA_CHECK(out.good(), ErrorKind::kIo, who, ": cannot write ", hub_json_, ".tmp");
  }
  ::chmod((hub_json_ + ".tmp").c_str(), 0600);
  std::filesystem::rename(hub_json_ + ".tmp", hub_json_);
  std::printf("%s: hub at %s", who.c_str(), server_->url().c_str());
  if (info.contains("version"))
    std::printf(", version %llu", static_cast<unsigned long long>(info["version"].get<uint64_t>()));
  if (info.value("resumed", false)) std::printf(" (resumed from checkpoint)");
  std::printf("\n%s: join string: %s\n", who.c_str(), join.c_str());
  if (!trainer_join.empty())
    std::printf("%s: trainer join string (stoa train --hub): %s\n", who.c_str(),
                trainer_join.c_str());
  // Off loopback the link holds a one-time login code, never the operator token: a browser's
  // history keeps nothing that opens the hub (http/operator_login.h).
  std::printf("%s: dashboard: %s\n", who.c_str(), server_->dashboard_url().c_str());
  std::fflush(stdout);
}

void HubProcess::stop() {
  if (stopped_) return;
  stopped_ = true;
  hub_->stop();
  if (server_) server_->stop();
  hub_validator_.reset();  // no intake any more; its thread hands verdicts to the hub
  if (validation_queue_) validation_queue_->stop();
  queue_validator_.reset();
  std::error_code ec;
  std::filesystem::remove(hub_json_, ec);
}

void tell_workers_the_run_ended(hub::Hub& hub, int heartbeat_interval_s,
                                const std::atomic<bool>& stop) {
  hub.end_run();
  const int64_t interval_ms = int64_t{1000} * std::max(1, heartbeat_interval_s);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(interval_ms);
  while (!stop && hub.workers_not_told_of_end(2 * interval_ms) > 0 &&
         std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
}

std::string trainer_token_of(const RunConfig& config) {
  if (!config.hub.trainer_token.empty()) return config.hub.trainer_token;
  std::ifstream in(std::filesystem::path(config.hub.ledger_path).parent_path() / "trainer_token");
  std::string token;
  in >> token;
  return token;
}

void print_run_summary(const trainer::TrainerLoop& loop,
                       const std::map<std::string, double>& counters) {
  nlohmann::json summary = {{"steps", loop.last_step()},
                            {"version", loop.version()},
                            {"groups_dropped_stale", loop.groups_dropped()}};
  for (const auto& [k, v] : counters) summary["counters"][k] = v;
  std::printf("%s\n", summary.dump().c_str());
}

}  // namespace stoa::run
