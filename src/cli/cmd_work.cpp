// `stoa work`: a rollout worker (roles/worker/worker.h). Built without libtorch.
#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "cli/backend_flag.h"
#include "cli/command.h"
#include "cli/kernel_target_flag.h"
#include "cli/task_option_flags.h"
#include "core/log.h"
#include "net/hub_client.h"
#include "net/join_string.h"
#include "roles/worker/failure_advice.h"
#include "roles/worker/sync_only.h"
#include "roles/worker/worker.h"

namespace stoa::cli {
namespace {

std::atomic<bool> g_stop{false};
void stop_work_on_signal(int) {
  g_stop = true;
}  // the loop notices at its next pass

// Exit status: 0 stopped cleanly (signal or --minutes), 3 the hub refused the join (wrong
// token: retrying cannot help), 1 any other error. Every error is told on stderr in plain words
// with what to do (roles/worker/failure_advice.h; the catalogue is docs/volunteer.md).
int run(const worker::WorkerOptions& o, bool verbose, bool sync_only) {
  // The volunteer reads the progress lines on stdout; the detailed log is for --verbose (or an
  // explicit STOA_LOG); warnings and errors always show.
  if (!verbose && !std::getenv("STOA_LOG") && log_level() < LogLevel::kWarn)
    set_log_level(LogLevel::kWarn);
  std::signal(SIGINT, stop_work_on_signal);
  std::signal(SIGTERM, stop_work_on_signal);
  std::signal(SIGPIPE, SIG_IGN);  // a hub that hangs up mid-request is an error, not a death
  std::string hub_url = o.hub_url;
  try {
    if (!o.join_string.empty()) hub_url = net::parse_join_string(o.join_string).url;
    if (sync_only) {
      worker::run_sync_only(o, g_stop);
    } else {
      const worker::WorkerStats s = worker::run_worker(o, g_stop);
      (void)s;
    }
  } catch (const std::exception& e) {
    std::fputs(worker::format_advice(worker::advise(e, hub_url)).c_str(), stderr);
    return dynamic_cast<const net::JoinRefused*>(&e) ? 3 : 1;
  }
  return 0;
}

CommandRegistration reg(
    "work", "Rollout worker: join a hub, sync weights, generate and stream rollouts",
    [](CLI::App& app) {
      auto o = std::make_shared<worker::WorkerOptions>();
      auto* hub = app.add_option("--hub", o->hub_url, "hub URL, http(s)://host:port");
      auto* token = app.add_option("--token", o->join_token, "join token");
      auto* join = app.add_option(
          "--join", o->join_string,
          "the hub's join string (URL#token=...&sha256=...): URL, token and certificate pin");
      join->excludes(hub)->excludes(token);
      hub->needs(token);
      app.add_option("--model", o->model_dir,
                     "directory with the run's config.json and tokenizer.json (default: "
                     "fetched from the hub into the state dir; weights always come from the hub)");
      auto task_flags = std::make_shared<TaskOptionFlags>();
      task_flags->add_to(app);
      app.add_option("--name", o->name, "worker name")->capture_default_str();
      app.add_option("--state-dir", o->state_dir,
                     "worker id and rollout spool (default .stoa-worker-<name>)");
      app.add_option("--threads", o->threads, "engine threads (0: all cores)")
          ->capture_default_str();
      app.add_option("--slots", o->slots, "rollouts generated together")->capture_default_str();
      auto backend = add_backend_flag(app, "the rollouts");
      app.add_option("--minutes", o->max_minutes, "stop after this long (0: until signalled)")
          ->capture_default_str();
      app.add_option("--seed", o->seed, "sampler seed (0: from the clock)");
      app.add_option("--join-timeout", o->join_timeout_s,
                     "seconds to keep retrying an unreachable hub at start")
          ->capture_default_str();
      app.add_option("--grace", o->shutdown_grace_s,
                     "seconds to finish rollouts on SIGINT/SIGTERM before releasing leases")
          ->capture_default_str();
      app.add_option("--max-memory", o->max_memory_mb,
                     "MB of memory the worker may use (0: what the machine has free); a model "
                     "that needs more is refused before its download")
          ->capture_default_str();
      auto no_checks = std::make_shared<bool>(false);
      app.add_flag("--no-checks", *no_checks,
                   "never take the hub's peer checks (replays of other workers' rollouts, on "
                   "one core and a second copy of the weights)");
      auto swarm = std::make_shared<std::string>("auto");
      app.add_option("--swarm", *swarm,
                     "fetch weights from other workers as well as the hub, and serve them on: "
                     "on, off, or auto (on unless the hub is on this machine's loopback)")
          ->check(CLI::IsMember({"auto", "on", "off"}))
          ->capture_default_str();
      auto no_serve = std::make_shared<bool>(false);
      app.add_flag("--no-serve", *no_serve,
                   "take weights from the swarm but never upload them to other workers");
      app.add_option("--upload", o->upload_kib_s,
                     "the most KiB/s this worker uploads to other workers (0: no cap; default: "
                     "--upload-share of the upload rate measured against the hub at start)")
          ->check(CLI::NonNegativeNumber);
      app.add_option("--upload-share", o->upload_share,
                     "the share of the measured upload rate served when --upload is not given")
          ->check(CLI::Range(0.01, 1.0))
          ->capture_default_str();
      app.add_option("--swarm-listen", o->swarm_listen,
                     "address:port the swarm listens on (default: every address, a free port)");
      auto sync_only = std::make_shared<bool>(false);
      app.add_flag("--sync-only", *sync_only,
                   "only follow the hub's weight versions (fetch, verify, serve them on): no "
                   "model, no rollouts");
      auto kernel_target = std::make_shared<std::string>();
      app.add_option("--kernel-target", *kernel_target,
                     "run the kernels on this SIMD target instead of the CPU's best (e.g. "
                     "AVX2, SSE4; names as the rollouts record them): rollouts are bit-identical "
                     "on every target, so a fleet can mix them");
      auto stage = std::make_shared<std::string>();
      app.add_option("--stage", *stage, "I/K: stage I of a pipeline group of K (0 leases)");
      app.add_option("--stage-listen", o->stage_listen, "host:port a stage serves on");
      app.add_option("--stage-next", o->stage_next, "host:port of the next stage (not the last)");
      app.add_flag("--stage-relay", o->stage_relayed, "behind NAT: reached via the hub's relay");
      app.add_option("--micro-batches", o->micro_batches,
                     "a pipeline group's head: micro-batches of its slots in flight at once "
                     "(0: one per stage)")
          ->check(CLI::NonNegativeNumber);
      auto verbose = std::make_shared<bool>(false);
      app.add_flag("--verbose,-v", *verbose,
                   "the detailed log on stderr (as STOA_LOG=info) besides the progress lines");
      return [o, verbose, kernel_target, task_flags, no_checks, swarm, no_serve, sync_only, stage,
              backend] {
        o->backend = gpu::parse_backend_choice(*backend);
        if (!stage->empty() && std::sscanf(stage->c_str(), "%d/%d", &o->stage, &o->stages) != 2) {
          std::fprintf(stderr, "stoa work: --stage takes I/K (stage I of K), not '%s'\n",
                       stage->c_str());
          return 2;
        }
        o->peer_checks = !*no_checks;
        o->serve = !*no_serve;
        o->swarm = *swarm == "on"    ? worker::WorkerOptions::Swarm::kOn
                   : *swarm == "off" ? worker::WorkerOptions::Swarm::kOff
                                     : worker::WorkerOptions::Swarm::kAuto;
        o->task_options = task_flags->options();
        if (o->join_string.empty() && o->hub_url.empty()) {
          std::fprintf(stderr, "stoa work: give --join STRING, or --hub URL and --token TOKEN\n");
          return 2;
        }
        if (!kernel_target->empty() && !force_kernel_target(*kernel_target)) return 2;
        return run(*o, *verbose, *sync_only);
      };
    });

}  // namespace
}  // namespace stoa::cli
