// `stoa work`: a rollout worker (roles/worker/worker.h). Built without libtorch.
#include <atomic>
#include <csignal>
#include <cstdio>
#include <memory>

#include "cli/command.h"
#include "core/log.h"
#include "net/hub_client.h"
#include "roles/worker/worker.h"

namespace stoa::cli {
namespace {

std::atomic<bool> g_stop{false};
void stop_work_on_signal(int) {
  g_stop = true;
}  // the loop notices at its next pass

// Exit status: 0 stopped cleanly (signal or --minutes), 3 the hub refused the join (wrong
// token: retrying cannot help), 1 any other error (message on stderr). docs/design/worker.md.
int run(const worker::WorkerOptions& o) {
  std::signal(SIGINT, stop_work_on_signal);
  std::signal(SIGTERM, stop_work_on_signal);
  std::signal(SIGPIPE, SIG_IGN);  // a hub that hangs up mid-request is an error, not a death
  try {
    const worker::WorkerStats s = worker::run_worker(o, g_stop);
    (void)s;
  } catch (const net::JoinRefused& e) {
    std::fprintf(stderr, "stoa work: %s\n", e.what());
    return 3;
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
                     "directory with the run's config.json and tokenizer.json (weights come "
                     "from the hub)")
          ->required();
      app.add_option("--index", o->index_dir, "local search index directory");
      app.add_option("--search-url", o->search_url, "retrieval server URL");
      app.add_option("--name", o->name, "worker name")->capture_default_str();
      app.add_option("--state-dir", o->state_dir,
                     "worker id and rollout spool (default .stoa-worker-<name>)");
      app.add_option("--threads", o->threads, "engine threads (0: all cores)")
          ->capture_default_str();
      app.add_option("--slots", o->slots, "rollouts generated together")->capture_default_str();
      app.add_option("--minutes", o->max_minutes, "stop after this long (0: until signalled)")
          ->capture_default_str();
      app.add_option("--seed", o->seed, "sampler seed (0: from the clock)");
      app.add_option("--join-timeout", o->join_timeout_s,
                     "seconds to keep retrying an unreachable hub at start")
          ->capture_default_str();
      app.add_option("--grace", o->shutdown_grace_s,
                     "seconds to finish rollouts on SIGINT/SIGTERM before releasing leases")
          ->capture_default_str();
      return [o] {
        if (o->join_string.empty() && o->hub_url.empty()) {
          std::fprintf(stderr, "stoa work: give --join STRING, or --hub URL and --token TOKEN\n");
          return 2;
        }
        return run(*o);
      };
    });

}  // namespace
}  // namespace stoa::cli
