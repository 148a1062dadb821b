// `stoa demo`: the project's main job, offline on one machine. Builds PaperSearchQA-mini, its BM25
// index, a tokenizer and a small model, warm-starts the model by SFT on scripted demonstrations
// (demo_setup.h), measures pass@1 on the validation split, then runs asynchronous RL the way a
// real deployment does — `stoa run` (hub + DPPO trainer) and N `stoa work` processes talking
// HTTP on loopback, int8 weights synced by PULSE — and measures pass@1 again. Progress is printed
// while it runs; the summary is printed as JSON (and written to --json-summary).
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "cli/child_process.h"
#include "cli/command.h"
#include "cli/demo_report.h"
#include "cli/demo_setup.h"
#include "core/error.h"
#include "model/arch_registry.h"
#include "model/weights.h"
#include "net/http_client.h"
#include "pulse/model_view.h"

namespace stoa::cli {
namespace {
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

std::atomic<bool> g_interrupted{false};
void on_interrupt(int) {
  g_interrupted = true;
}

struct Options {
  DemoSetupOptions setup;
  bool full = false;
  bool fresh = false;
  double minutes = 8;  // RL wall-clock budget
  int workers = 4;
  int worker_threads = 1;
  // libtorch's OpenMP barriers spin: with workers on the same cores, one trainer thread is
  // far faster than two (docs/design/train.md).
  int trainer_threads = 1;
  int worker_slots = 8;
  int64_t eval_limit = 400;
  bool eval_test = false;
  std::string json_summary;
  // RL
  int group_size = 8;
  int groups_per_step = 4;
  double rl_lr = 2e-4;
  int max_staleness = 2;
  std::string loss = "dppo-binary-tv";
  int anchor_every = 20;
  double temperature = 1.0;
  int max_turns = 2;
  int max_new_tokens = 64;
};

void say(const std::string& line) {
  std::printf("[demo] %s\n", line.c_str());
  std::fflush(stdout);
}

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

std::string random_token() {
  std::random_device rd;
  std::ostringstream s;
  s << std::hex << rd() << rd() << rd() << rd();
  return s.str();
}

nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path);
  STOA_CHECK(in.good(), ErrorKind::kNotFound, "demo: ", path, " was not written");
  return nlohmann::json::parse(in);
}

// pass@1 with the int8 weights a worker would hold (greedy, the same episode limits as RL).
double evaluate(const Options& o, const std::string& exe, const DemoPaths& p,
                const std::string& model, const std::string& split, const std::string& name) {
  const std::string out = p.logs + "/" + name + ".json";
  say(name + ": pass@1 of " + model + " on " + split +
      (o.eval_limit > 0 ? " (first " + std::to_string(o.eval_limit) + " questions)" : ""));
  run_child_or_throw({exe,
                      "eval",
                      "--model",
                      model,
                      "--data",
                      p.data,
                      "--index",
                      p.index,
                      "--split",
                      split,
                      "--limit",
                      std::to_string(o.eval_limit),
                      "--int8",
                      "--max-turns",
                      std::to_string(o.max_turns),
                      "--max-new-tokens",
                      std::to_string(o.max_new_tokens),
                      "--max-observation-tokens",
                      std::to_string(o.setup.max_observation_tokens),
                      "--json",
                      out},
                     p.logs + "/" + name + ".log", "stoa eval (" + name + ")");
  const nlohmann::json j = read_json(out);
  const double pass1 = j.at("pass1").get<double>();
  char buf[160];
  std::snprintf(buf, sizeof buf, "%s: pass@1 %.3f (%lld questions, %.0f s)", name.c_str(), pass1,
                static_cast<long long>(j.value("questions", int64_t{0})), j.value("seconds", 0.0));
  say(buf);
  return pass1;
}

void write_run_config(const Options& o, const DemoPaths& p, const std::string& path,
                      const std::string& token) {
  std::ofstream f(path);
  f << "# Written by `stoa demo`: the hub + trainer of the demo's RL phase.\n"
    << "[run]\ndir = \"" << p.run << "\"\nmodel = \"" << p.sft_model << "\"\ndata = \"" << p.data
    << "\"\nindex = \"" << p.index << "\"\n\n"
    << "[hub]\nhost = \"127.0.0.1\"\nport = 0\njoin_token = \"" << token
    << "\"\ngroup_size = " << o.group_size << "\nmax_tokens = 2048\nlease_ttl_s = 120\n\n"
    << "[sampling]\ntemperature = " << o.temperature << "\nmax_new_tokens = " << o.max_new_tokens
    << "\nmax_turns = " << o.max_turns
    << "\nmax_observation_tokens = " << o.setup.max_observation_tokens << "\n\n"
    << "[trainer]\nthreads = " << o.trainer_threads << "\nlr = " << o.rl_lr << "\nloss = \""
    << o.loss << "\"\ngroups_per_step = " << o.groups_per_step
    << "\nmin_groups = 1\ngather_timeout_ms = 5000\nmax_staleness = " << o.max_staleness
    << "\ncheckpoint_every = 1\n\n"
    << "[pulse]\nanchor_every = " << o.anchor_every << "\n";
  STOA_CHECK(f.good(), ErrorKind::kIo, "demo: cannot write ", path);
}

struct RlResult {
  nlohmann::json last_status;
  double seconds = 0;
  double worker_idle_fraction = 0;
  int workers_failed = 0;
};

RlResult run_rl(const Options& o, const std::string& exe, const DemoPaths& p) {
  fs::remove_all(p.run);
  fs::create_directories(p.run);
  const std::string token = random_token();
  const std::string config = o.setup.dir + "/run.toml";
  write_run_config(o, p, config, token);
  say("rl: starting the hub + trainer (" + config + ", log " + p.logs + "/run.log)");
  ChildProcess hub = ChildProcess::start({exe, "run", "--config", config}, p.logs + "/run.log");
  const std::string hub_json = p.run + "/hub.json";
  const auto t_wait = Clock::now();
  while (!fs::exists(hub_json)) {
    STOA_CHECK(hub.running(), ErrorKind::kIo, "demo: `stoa run` exited before listening:\n",
               tail_of_file(hub.log_path(), 15));
    STOA_CHECK(seconds_since(t_wait) < 300, ErrorKind::kIo,
               "demo: `stoa run` did not start listening in 300 s:\n",
               tail_of_file(hub.log_path(), 15));
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // hub.json fully written
  const std::string url = read_json(hub_json).at("url").get<std::string>();
  say("rl: hub at " + url + "; starting " + std::to_string(o.workers) + " workers");

  std::vector<ChildProcess> workers;
  for (int i = 0; i < o.workers; ++i) {
    const std::string name = "w" + std::to_string(i + 1);
    workers.push_back(ChildProcess::start(
        {exe,           "work",
         "--hub",       url,
         "--token",     token,
         "--model",     p.sft_model,
         "--index",     p.index,
         "--name",      name,
         "--state-dir", p.run + "/worker-" + name,
         "--threads",   std::to_string(o.worker_threads),
         "--slots",     std::to_string(o.worker_slots),
         "--seed",      std::to_string(o.setup.seed * 1000 + static_cast<uint64_t>(i) + 1),
         "--grace",     "20"},
        p.logs + "/worker-" + name + ".log"));
  }

  net::HttpClient http(url);
  RlResult r;
  const auto t0 = Clock::now();
  auto last_print = Clock::now() - std::chrono::hours(1);
  std::vector<bool> reported(workers.size(), false);
  while (seconds_since(t0) < o.minutes * 60 && !g_interrupted) {
    STOA_CHECK(hub.running(), ErrorKind::kIo, "demo: `stoa run` died during RL (exit code ",
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
  say(g_interrupted ? "rl: interrupted; stopping workers and the trainer"
                    : "rl: time is up; stopping workers (they finish or release their leases)");
  for (auto& w : workers) w.signal(SIGTERM);
  for (auto& w : workers) w.stop(std::chrono::seconds(40));
  try {
    const net::HttpResponse res = http.get("/v1/status");
    if (res.status == 200) r.last_status = nlohmann::json::parse(res.body);
  } catch (const std::exception&) {
  }
  const int hub_code = hub.stop(std::chrono::seconds(120));
  STOA_CHECK(hub_code == 0, ErrorKind::kIo, "demo: `stoa run` exited with code ", hub_code, ":\n",
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
  return r;
}

int run(Options o) {
  if (o.full) {
    o.minutes = std::max(o.minutes, 40.0);
    o.setup.sft_examples = std::max<int64_t>(o.setup.sft_examples, 4000);
    o.eval_limit = 0;
    o.eval_test = true;
  }
  if (o.fresh) fs::remove_all(o.setup.dir);
  fs::create_directories(o.setup.dir);
  o.setup.dir = fs::canonical(o.setup.dir).string();
  const DemoPaths p(o.setup.dir);
  const std::string exe = self_executable();
  std::signal(SIGINT, on_interrupt);
  std::signal(SIGTERM, on_interrupt);
  const auto t_start = Clock::now();
  say("directory " + o.setup.dir + " (logs in " + p.logs + ")");

  prepare_demo(o.setup, say);
  const ModelWeights sft = load_model_dir(p.sft_model);
  const int64_t full_int8_bytes =
      static_cast<int64_t>(pulse::int8_view_of(sft, 0, nullptr).nbytes());
  const double pass1_before = evaluate(o, exe, p, p.sft_model, "validation", "eval-before");
  const double setup_seconds = seconds_since(t_start);

  const RlResult rl = run_rl(o, exe, p);
  const std::string final_model = p.run + "/checkpoint/model";
  STOA_CHECK(fs::exists(final_model + "/config.json"), ErrorKind::kNotFound,
             "demo: the trainer left no checkpoint in ", final_model, " (no RL step finished? see ",
             p.logs, "/run.log)");
  copy_tokenizer(p.sft_model, final_model);
  const double pass1_after = evaluate(o, exe, p, final_model, "validation", "eval-after");
  double pass1_test_before = -1, pass1_test_after = -1;
  if (o.eval_test) {
    pass1_test_before = evaluate(o, exe, p, p.sft_model, "test", "test-before");
    pass1_test_after = evaluate(o, exe, p, final_model, "test", "test-after");
  }

  const nlohmann::json steps = summarize_step_log(p.run + "/steps.jsonl");
  const nlohmann::json& counters =
      rl.last_status.contains("counters") ? rl.last_status["counters"] : nlohmann::json::object();
  const double dropped_groups = counters.value("groups_dropped_stale", 0.0);
  nlohmann::json s = {
      {"pass1_before", pass1_before},
      {"pass1_after", pass1_after},
      {"eval_split", "validation"},
      {"eval_questions", o.eval_limit},
      {"steps", steps["steps"]},
      {"versions", counters.value("versions", 0.0)},
      {"rollouts_accepted", counters.value("rollouts_accepted", 0.0)},
      {"rollouts_rejected", counters.value("rollouts_rejected", 0.0)},
      {"rollouts_dropped_stale",
       std::max(dropped_groups, steps["groups_dropped_stale"].get<double>()) * o.group_size},
      {"dppo_masked_fraction", steps["dppo_masked_fraction"]},
      {"tv_mean", steps["tv_mean"]},
      {"kl_mean", steps["kl_mean"]},
      {"patch_bytes_mean", steps["patch_bytes_mean"]},
      {"full_int8_bytes", full_int8_bytes},
      {"trainer_busy_fraction",
       rl.seconds > 0 ? steps["trainer_compute_seconds"].get<double>() / rl.seconds : 0.0},
      {"worker_idle_fraction", rl.worker_idle_fraction},
      {"reward_first_quarter", steps["reward_first_quarter"]},
      {"reward_last_quarter", steps["reward_last_quarter"]},
      {"workers", o.workers},
      {"workers_failed", rl.workers_failed},
      {"rl_seconds", rl.seconds},
      {"setup_seconds", setup_seconds},
      {"total_seconds", seconds_since(t_start)},
      {"loss", o.loss},
      {"max_staleness", o.max_staleness},
      {"model_parameters", count_parameters(sft.config)},
  };
  if (o.eval_test) {
    s["pass1_test_before"] = pass1_test_before;
    s["pass1_test_after"] = pass1_test_after;
  }
  say("summary:");
  std::printf("%s\n", s.dump(2).c_str());
  if (!o.json_summary.empty()) {
    std::ofstream f(o.json_summary);
    f << s.dump(2) << '\n';
    STOA_CHECK(f.good(), ErrorKind::kIo, "demo: cannot write ", o.json_summary);
  }
  return 0;
}

CommandRegistration reg(
    "demo",
    "The main job: PaperSearchQA-mini + SFT warm start + asynchronous int8 RL with a hub, a "
    "trainer and N worker processes on loopback; pass@1 before and after",
    [](CLI::App& app) {
      auto o = std::make_shared<Options>();
      o->setup.dir = "stoa-demo";
      app.add_option("--dir", o->setup.dir, "working directory (reused between runs)")
          ->capture_default_str();
      app.add_option("--minutes", o->minutes, "RL wall-clock minutes")->capture_default_str();
      app.add_option("--workers", o->workers, "worker processes")->capture_default_str();
      app.add_option("--json-summary", o->json_summary, "also write the summary JSON here");
      app.add_flag("--full", o->full,
                   "the long run: >= 40 RL minutes, more demonstrations, the whole validation "
                   "split and the test split once at the end");
      app.add_flag("--fresh", o->fresh,
                   "delete --dir first (otherwise finished stages are reused)");
      app.add_option("--seed", o->setup.seed, "seed of data, model and sampling")
          ->capture_default_str();
      app.add_option("--papers", o->setup.papers, "corpus size")->capture_default_str();
      app.add_option("--questions", o->setup.questions, "questions over all splits")
          ->capture_default_str();
      app.add_option("--sft-examples", o->setup.sft_examples, "scripted demonstrations")
          ->capture_default_str();
      app.add_option("--sft-epochs", o->setup.sft_epochs)->capture_default_str();
      app.add_option("--sft-lr", o->setup.sft_lr)->capture_default_str();
      app.add_option("--preset", o->setup.preset, "model shape")->capture_default_str();
      app.add_option("--vocab-size", o->setup.vocab_size)->capture_default_str();
      app.add_option("--eval-limit", o->eval_limit, "validation questions evaluated (0: all)")
          ->capture_default_str();
      app.add_option("--sft-threads", o->setup.threads, "trainer threads during SFT")
          ->capture_default_str();
      app.add_option("--trainer-threads", o->trainer_threads, "trainer threads during RL")
          ->capture_default_str();
      app.add_option("--worker-threads", o->worker_threads)->capture_default_str();
      app.add_option("--worker-slots", o->worker_slots, "rollouts each worker generates together")
          ->capture_default_str();
      app.add_option("--group-size", o->group_size)->capture_default_str();
      app.add_option("--groups-per-step", o->groups_per_step)->capture_default_str();
      app.add_option("--lr", o->rl_lr, "RL learning rate")->capture_default_str();
      app.add_option("--loss", o->loss)->capture_default_str();
      app.add_option("--max-staleness", o->max_staleness, "in versions")->capture_default_str();
      app.add_option("--anchor-every", o->anchor_every)->capture_default_str();
      app.add_option("--temperature", o->temperature)->capture_default_str();
      app.add_option("--max-turns", o->max_turns)->capture_default_str();
      app.add_option("--max-new-tokens", o->max_new_tokens)->capture_default_str();
      return [o] { return run(*o); };
    });

}  // namespace
}  // namespace stoa::cli
