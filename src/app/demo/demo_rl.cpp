#include "app/demo/demo_rl.h"

#include <signal.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <thread>

#include "app/demo/demo_report.h"
#include "app/demo/worker_targets.h"
#include "app/export/hf_export_from.h"
#include "core/error.h"
#include "core/process.h"
#include "core/process_run.h"
#include "net/http_client.h"
#include "net/protocol.h"
#include "pulse/patch_share.h"
#include "roles/run/run_config.h"
#include "train/loss_config.h"

namespace stoa::app {
namespace {
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path);
  STOA_CHECK(in.good(), ErrorKind::kNotFound, path, " was not written");
  return nlohmann::json::parse(in);
}

}  // namespace

void clear_phase_logs(const std::string& logs) {
  fs::create_directories(logs);
  // Regular files only: the run directory may live inside `logs` (`stoa experiment ablations` puts
  // <variant>/run beside <variant>/run.log), and it is not a log.
  for (const auto& e : fs::directory_iterator(logs)) {
    const std::string name = e.path().filename().string();
    if (e.is_regular_file() && (name.rfind("run", 0) == 0 || name.rfind("worker-", 0) == 0))
      fs::remove(e.path());
  }
}

void write_run_config(const RlOptions& o, const DemoPaths& p, const std::string& model_dir,
                      const std::string& run_dir, const std::string& path,
                      const std::string& token) {
  run::RunConfig c;
  c.run_dir = run_dir;
  c.model_dir = model_dir;
  c.data_dir = p.data;
  c.task = "search";
  c.task_options.set("index", p.index);
  c.server.host = "127.0.0.1";
  c.server.port = 0;
  c.hub.join_token = token;
  c.hub.group_size = o.group_size;
  c.hub.max_tokens = 2048;
  c.hub.lease_ttl_ms = 120'000;
  c.hub.sampling.temperature = static_cast<float>(o.temperature);
  c.hub.sampling.max_new_tokens = o.episode.max_new_tokens;
  c.hub.sampling.max_turns = o.episode.max_turns;
  c.hub.sampling.max_observation_tokens = o.episode.max_observation_tokens;
  c.train.threads = o.trainer_threads;
  STOA_CHECK(parse_dtype(o.trainer_dtype, &c.train.compute_dtype) &&
                 (c.train.compute_dtype == DType::kF32 || c.train.compute_dtype == DType::kBF16),
             ErrorKind::kInvalidArgument, "demo: --trainer-dtype is f32 or bf16, not '",
             o.trainer_dtype, "'");
  c.train.sharding = train::parse_sharding(o.trainer_sharding);
  c.train.optimizer.lr = o.lr;
  c.train.loss.kind = train::parse_loss_kind(o.loss);
  c.train.seed = o.seed;
  if (o.delta > 0) c.train.loss.delta_hi = c.train.loss.delta_lo = o.delta;
  if (o.ratio_cap > 0) c.train.loss.ratio_cap = o.ratio_cap;
  c.loop.groups_per_step = static_cast<size_t>(o.groups_per_step);
  c.loop.skip_uniform_groups = o.skip_uniform_groups;
  c.loop.min_groups = 1;
  c.loop.gather_timeout = std::chrono::milliseconds(5000);
  c.loop.staleness.max_staleness = static_cast<uint64_t>(o.max_staleness);
  c.loop.checkpoint_every = 1;
  c.loop.publisher.anchor_every = static_cast<uint64_t>(o.anchor_every);
  c.hub.verify.enabled = o.verify > 0 || o.peer_checks;
  if (o.verify > 0) c.hub.verify.fraction = o.verify;
  c.hub.verify.peer = o.peer_checks;
  if (o.keep_anchors > 0)
    c.loop.publisher.retention.keep_anchors = static_cast<size_t>(o.keep_anchors);
  if (o.lora_rank > 0) {
    c.train.lora.rank = o.lora_rank;
    c.train.lora.alpha = o.lora_alpha;
    c.train.lora.targets = {"all-linear"};
    c.train.lora.base_dtype = c.train.compute_dtype;
    c.train.optimizer.lr = o.lora_lr;
  }
  run::save_run_config(c, path, "Written by `stoa demo`: the hub + trainer of one RL phase.");
}

RlResult run_rl_phase(const RlOptions& o, const DemoPaths& p, const std::string& model_dir,
                      const std::string& run_dir, const std::string& logs, const Say& say,
                      const std::atomic<bool>& interrupted) {
  // A name this machine lacks fails here, before anything starts.
  const std::vector<std::string> kernel_targets = assign_kernel_targets(
      parse_kernel_targets(o.worker_kernel_targets, available_kernel_targets()), o.workers);
  const std::vector<std::string> backends = assign_worker_backends(o.worker_backends, o.workers);
  fs::remove_all(run_dir);
  clear_phase_logs(logs);
  fs::create_directories(run_dir);
  const std::string exe = self_executable();
  const std::string token = net::random_token();
  const std::string config = run_dir + "/run.toml";
  write_run_config(o, p, model_dir, run_dir, config, token);
  say("rl: starting the hub + trainer (" + config + ", log " + logs + "/run.log)");
  std::vector<std::string> hub_argv{exe, "run", "--config", config};
  if (o.trainer_ranks > 1)
    hub_argv = {exe, "train", "--config", config, "--nproc", std::to_string(o.trainer_ranks)};
  Process hub = Process::start(hub_argv, logged_to(logs + "/run.log"));
  const std::string hub_json = run_dir + "/hub.json";
  const auto t_wait = Clock::now();
  while (!fs::exists(hub_json)) {
    STOA_CHECK(hub.running(), ErrorKind::kIo, "`stoa run` exited before listening:\n",
               tail_of_file(hub.log_path(), 15));
    STOA_CHECK(seconds_since(t_wait) < 300, ErrorKind::kIo,
               "`stoa run` did not start listening in 300 s:\n", tail_of_file(hub.log_path(), 15));
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // hub.json fully written
  const std::string url = read_json(hub_json).at("url").get<std::string>();
  std::string forced;
  for (size_t i = 0; i < kernel_targets.size(); ++i) {
    forced += i ? ", w" : " (kernel targets: w";
    forced += std::to_string(i + 1);
    forced += ' ';
    forced += kernel_targets[i];
    if (i + 1 == kernel_targets.size()) forced += ')';
  }
  say("rl: hub at " + url + "; starting " + std::to_string(o.workers) + " workers" + forced);

  std::vector<Process> workers;
  for (int i = 0; i < o.workers; ++i) {
    std::string name = std::to_string(i + 1);
    name.insert(0, 1, 'w');  // (not "w" + ...: GCC 12 -O3 warns a false -Wrestrict on that)
    const std::string seed = std::to_string(o.seed * 1000 + static_cast<uint64_t>(i) + 1);
    std::vector<std::string> argv{exe,           "work",
                                  "--hub",       url,
                                  "--token",     token,
                                  "--model",     model_dir,
                                  "--index",     p.index,
                                  "--name",      name,
                                  "--state-dir", run_dir + "/worker-" + name,
                                  "--threads",   std::to_string(o.worker_threads),
                                  "--slots",     std::to_string(o.worker_slots),
                                  "--seed",      seed,
                                  "--grace",     "20",
                                  "--verbose"};  // the worker logs keep the detailed log
    if (!kernel_targets.empty())
      argv.insert(argv.end(), {"--kernel-target", kernel_targets[static_cast<size_t>(i)]});
    if (!backends.empty()) argv.insert(argv.end(), {"--backend", backends[static_cast<size_t>(i)]});
    workers.push_back(Process::start(argv, logged_to(logs + "/worker-" + name + ".log")));
  }

  net::HttpClient http(url);
  RlResult r;
  const auto t0 = Clock::now();
  auto last_print = Clock::now() - std::chrono::hours(1);
  std::vector<bool> reported(workers.size(), false);
  const auto steps_taken = [&] {
    return r.last_status.is_object() ? r.last_status.value("step", int64_t{0}) : int64_t{0};
  };
  const double limit_s = o.minutes * 60 + (o.min_steps > 0 ? 600 : 0);
  while (!interrupted && seconds_since(t0) < limit_s &&
         (seconds_since(t0) < o.minutes * 60 || steps_taken() < o.min_steps)) {
    STOA_CHECK(hub.running(), ErrorKind::kIo, "`stoa run` died during RL (exit code ",
               hub.poll().value_or(-1), "):\n", tail_of_file(hub.log_path(), 20));
    for (size_t i = 0; i < workers.size(); ++i)
      if (!reported[i] && !workers[i].running()) {
        reported[i] = true;
        ++r.workers_failed;
        say("rl: worker w" + std::to_string(i + 1) + " exited (code " +
            std::to_string(workers[i].poll().value_or(-1)) + "); the run continues. Its log:\n" +
            tail_of_file(workers[i].log_path(), 8));
      }
    if (seconds_since(last_print) >= 15) {
      try {
        const net::HttpResponse res = http.get("/v1/status");
        if (res.status == 200) {
          r.last_status = nlohmann::json::parse(res.body);
          say(rl_progress_line(r.last_status, seconds_since(t0)));
        }
      } catch (const std::exception& e) {
        say(std::string("rl: status: ") + e.what());
      }
      last_print = Clock::now();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
  say(interrupted ? "rl: interrupted; stopping workers and the trainer"
                  : "rl: time is up; stopping workers (they finish or release their leases)");
  for (auto& w : workers) w.signal(SIGTERM);
  for (auto& w : workers) w.stop(std::chrono::seconds(40));
  // Reaped now (a worker that died early was reaped when it was noticed): their own CPU time.
  for (auto& w : workers) r.worker_cpu_seconds += w.cpu_seconds();
  r.worker_kernel_targets = kernel_targets;
  r.worker_backends = backends;
  try {
    const net::HttpResponse res = http.get("/v1/status");
    if (res.status == 200) r.last_status = nlohmann::json::parse(res.body);
  } catch (const std::exception&) {
    // The last periodic status stands.
  }
  const int hub_code = hub.stop(std::chrono::seconds(120));
  STOA_CHECK(hub_code == 0, ErrorKind::kIo, "`stoa run` exited with code ", hub_code, ":\n",
             tail_of_file(hub.log_path(), 20));
  r.seconds = seconds_since(t0);
  double idle = 0;
  int n = 0;
  if (r.last_status.contains("workers"))
    for (const auto& w : r.last_status["workers"]) {
      idle += w.value("idle_fraction", 0.0);
      ++n;
    }
  r.worker_idle_fraction = n ? idle / n : 0.0;
  r.final_model = run_dir + "/checkpoint/model";
  if (o.lora_rank > 0) {
    // A LoRA checkpoint holds the adapters, not the model: the base + adapters merged is what
    // the workers' last version was made from, and what is evaluated.
    STOA_CHECK(fs::exists(run_dir + "/checkpoint/trainer.json"), ErrorKind::kNotFound,
               "the trainer left no checkpoint in ", run_dir, "/checkpoint (no RL step finished? ",
               "see ", logs, "/run.log)");
    ExportHfRequest merge;
    merge.from = run_dir;
    merge.out = run_dir + "/merged";
    merge.dtype = "f32";
    merge.shard_mb = 0;
    (void)export_hf_from(merge);
    r.final_model = merge.out;
  }
  STOA_CHECK(fs::exists(r.final_model + "/config.json"), ErrorKind::kNotFound,
             "the trainer left no checkpoint in ", r.final_model, " (no RL step finished? see ",
             logs, "/run.log)");
  copy_tokenizer(model_dir, r.final_model);
  return r;
}

std::vector<std::string> eval_command(const EvalRun& r) {
  std::vector<std::string> argv = {self_executable(),
                                   "eval",
                                   "--model",
                                   r.model,
                                   "--data",
                                   r.data,
                                   "--split",
                                   r.split,
                                   "--limit",
                                   std::to_string(r.limit),
                                   "--temperature",
                                   std::to_string(r.temperature),
                                   "--seed",
                                   std::to_string(r.seed),
                                   "--max-turns",
                                   std::to_string(r.episode.max_turns),
                                   "--max-new-tokens",
                                   std::to_string(r.episode.max_new_tokens),
                                   "--max-observation-tokens",
                                   std::to_string(r.episode.max_observation_tokens)};
  if (r.int8) argv.push_back("--int8");
  if (!r.index.empty()) argv.insert(argv.end(), {"--index", r.index});
  if (!r.json_out.empty()) argv.insert(argv.end(), {"--json", r.json_out});
  if (!r.rollouts.empty()) argv.insert(argv.end(), {"--rollouts", r.rollouts});
  if (!r.questions.empty()) argv.insert(argv.end(), {"--questions", r.questions});
  return argv;
}

nlohmann::json run_eval(const EvalRun& run, const std::string& log_path) {
  STOA_CHECK(!run.json_out.empty(), ErrorKind::kInvalidArgument, "run_eval: no json_out");
  fs::remove(run.json_out);
  run_child_or_throw(eval_command(run), log_path, "stoa eval (" + log_path + ")");
  return read_json(run.json_out);
}

double evaluate_pass1(const DemoPaths& p, const std::string& model, const std::string& split,
                      int64_t limit, const EpisodeLimits& e, const std::string& logs,
                      const std::string& name, const Say& say) {
  const std::string out = logs + "/" + name + ".json";
  fs::remove(out);
  fs::remove(logs + "/" + name + ".log");
  say(name + ": pass@1 of " + model + " on " + split +
      (limit > 0 ? " (first " + std::to_string(limit) + " questions)" : ""));
  EvalRun run;
  run.model = model;
  run.data = p.data;
  run.index = p.index;
  run.split = split;
  run.limit = limit;
  run.episode = e;
  run.json_out = out;
  const nlohmann::json j = run_eval(run, logs + "/" + name + ".log");
  const double pass1 = j.at("pass1").get<double>();
  char buf[200];
  std::snprintf(buf, sizeof buf, "%s: pass@1 %.3f (%lld questions, %.0f s)", name.c_str(), pass1,
                static_cast<long long>(j.value("questions", int64_t{0})), j.value("seconds", 0.0));
  say(buf);
  return pass1;
}

// The phase's figures from its step log and the hub's counters.
static nlohmann::json phase_figures(const RlOptions& o, const RlResult& r,
                                    const std::string& run_dir) {
  const nlohmann::json steps = summarize_step_log(run_dir + "/steps.jsonl");
  const nlohmann::json counters =
      r.last_status.contains("counters") ? r.last_status["counters"] : nlohmann::json::object();
  const double dropped_groups = std::max(counters.value("groups_dropped_stale", 0.0),
                                         steps["groups_dropped_stale"].get<double>());
  nlohmann::json figures = {
      {"rollouts_dropped_stale", dropped_groups * o.group_size},
      // Closed without a trainer pass (every reward equal: zero gradient; trainer_loop.h).
      {"rollouts_uniform", steps["groups_uniform"].get<double>() * o.group_size},
      {"skip_uniform_groups", o.skip_uniform_groups},
      {"dppo_masked_fraction", steps["dppo_masked_fraction"]},
      // What a worker downloads per version: the patch, or with an anchor every version
      // (full-weight sync) the whole int8 weights.
      {"sync_bytes_per_version",
       o.anchor_every == 1 ? steps["anchor_bytes_mean"] : steps["patch_bytes_mean"]},
      // Time-weighted over the trainer's steps: Σ compute / Σ (gather wait + compute), the
      // same figure `stoa plot` and `stoa bench fleet` report (roles/trainer/step_log.h).
      {"trainer_busy_fraction", steps["busy_fraction"]},
      {"worker_idle_fraction", r.worker_idle_fraction},
      {"workers_failed", r.workers_failed},
      {"rl_seconds", r.seconds},
      {"loss", o.loss},
      {"max_staleness", o.max_staleness},
      {"anchor_every", o.anchor_every},
      {"full_weight_sync", o.anchor_every == 1 && o.keep_anchors == 1},
      {"lr", o.lora_rank > 0 ? o.lora_lr : o.lr},
      {"lora_rank", o.lora_rank}};
  if (o.lora_rank > 0) figures["lora_alpha"] = o.lora_alpha;
  // The share of the int8 view's values a version's patch writes, over the patches the store
  // still holds (pulse/patch_share.h). A figure of the report: a store it cannot read is said,
  // not fatal to the phase's other figures.
  try {
    const pulse::PatchShares shares = pulse::patch_shares(run_dir + "/blobs");
    figures["patch_int8_share_mean"] = shares.mean();
    figures["patch_int8_share_versions"] = shares.int8_share.size();
  } catch (const Error& e) {
    figures["patch_int8_share_error"] = e.what();
  }
  // The hub's counters under their own names (0 where it reported none).
  for (const char* name : {"versions", "rollouts_accepted", "rollouts_rejected",
                           "rollouts_verified", "verification_failures", "workers_quarantined",
                           "verification_cpu_seconds", "peer_checks_passed", "peer_checks_failed",
                           "peer_check_cpu_seconds", "checks_escalated", "checkers_quarantined",
                           "canary_checks_leased", "canary_checks_caught", "canary_checks_passed"})
    figures[name] = counters.value(name, 0.0);
  // The step log's summary figures under theirs.
  for (const char* name : {"steps", "tv_mean", "kl_mean", "patch_bytes_mean", "anchor_bytes_mean",
                           "reward_first_quarter", "reward_last_quarter", "tv_first_quarter",
                           "tv_last_quarter", "seconds_to_reward_level", "reward_level"})
    figures[name] = steps[name];
  return figures;
}

nlohmann::json rl_summary(const RlOptions& o, const RlResult& r, const std::string& run_dir) {
  nlohmann::json summary = phase_figures(o, r, run_dir);
  const nlohmann::json& status = r.last_status;
  summary.update(
      verification_cost(status.contains("counters") ? status["counters"] : nlohmann::json::object(),
                        r.worker_cpu_seconds));
  summary["rollouts_verified_by_target"] =
      status.is_object() && status.contains("verification")
          ? status["verification"].value("by_target", nlohmann::json::object())
          : nlohmann::json::object();
  nlohmann::json targets = nlohmann::json::object();
  for (size_t i = 0; i < r.worker_kernel_targets.size(); ++i) {
    std::string name = std::to_string(i + 1);
    name.insert(0, 1, 'w');  // (GCC 12's false -Wrestrict on "w" + ..., as above)
    targets[name] = r.worker_kernel_targets[i];
  }
  summary["worker_kernel_targets"] = targets;
  nlohmann::json backends = nlohmann::json::object();
  for (size_t i = 0; i < r.worker_backends.size(); ++i) {
    std::string name = std::to_string(i + 1);
    name.insert(0, 1, 'w');
    backends[name] = r.worker_backends[i];
  }
  summary["worker_backends"] = backends;
  return summary;
}

}  // namespace stoa::app
