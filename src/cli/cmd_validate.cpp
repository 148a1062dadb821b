// `stoa validate --hub URL`: a trusted validator process that leases replay jobs from the hub and
// posts verdicts (roles/verify/remote_validator.h, docs/design/verification.md). Built without
// libtorch.
#include <atomic>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <memory>

#include "cli/backend_flag.h"
#include "cli/command.h"
#include "cli/task_option_flags.h"
#include "roles/verify/remote_validator.h"

namespace stoa::cli {
namespace {

std::atomic<bool> g_stop{false};
void stop_validate_on_signal(int) {
  g_stop = true;
}

// Exit status: 0 stopped cleanly (signal or --max-jobs), 3 the hub refused the token (401/403:
// retrying cannot help), 1 any other error (message on stderr).
int run(verify::RemoteValidatorOptions o, const std::string& token_file) {
  std::signal(SIGINT, stop_validate_on_signal);
  std::signal(SIGTERM, stop_validate_on_signal);
  std::signal(SIGPIPE, SIG_IGN);
  if (!token_file.empty()) {
    std::ifstream in(token_file);
    if (!(in >> o.token)) {
      std::fprintf(stderr, "stoa validate: cannot read a token from %s\n", token_file.c_str());
      return 2;
    }
  }
  try {
    const verify::RemoteValidatorStats s = verify::run_remote_validator(o, g_stop);
    std::printf(
        "{\"verdicts\": %lld, \"passed\": %lld, \"failed\": %lld, \"refused\": %lld, "
        "\"abandoned\": %lld, \"cpu_seconds\": %.6f}\n",
        static_cast<long long>(s.verdicts), static_cast<long long>(s.passed),
        static_cast<long long>(s.failed), static_cast<long long>(s.refused),
        static_cast<long long>(s.abandoned), s.cpu_seconds);
  } catch (const verify::ValidatorRefused& e) {
    std::fprintf(stderr, "stoa validate: %s\n", e.what());
    return 3;
  }
  return 0;
}

CommandRegistration reg(
    "validate", "Trusted validator: lease replay jobs from a hub and post verdicts",
    [](CLI::App& app) {
      auto o = std::make_shared<verify::RemoteValidatorOptions>();
      auto token_file = std::make_shared<std::string>();
      app.add_option("--hub", o->hub_url, "hub URL, http(s)://host:port")->required();
      auto* token =
          app.add_option("--token", o->token, "the hub's operator token (or a validate token)");
      app.add_option("--token-file", *token_file, "read the token from this file")->excludes(token);
      app.add_option("--pin", o->pin_sha256, "HTTPS: the hub certificate's SHA-256");
      app.add_option("--ca-file", o->ca_file, "HTTPS: a CA file to trust");
      app.add_option("--model", o->model_dir,
                     "directory with the run's config.json (and tokenizer.json)")
          ->required();
      auto task_flags = std::make_shared<TaskOptionFlags>();
      task_flags->add_to(app);
      app.add_option("--name", o->name, "validator name")->capture_default_str();
      app.add_option("--state-dir", o->state_dir, "blob mirror (default .stoa-validate-<name>)");
      app.add_option("--threads", o->threads, "engine threads")->capture_default_str();
      auto backend = add_backend_flag(app, "the replays");
      app.add_option("--wait", o->wait_s, "seconds a job request waits on the hub")
          ->capture_default_str();
      app.add_option("--max-jobs", o->max_jobs, "stop after this many verdicts (0: never)")
          ->capture_default_str();
      return [o, token_file, task_flags, backend] {
        o->backend = gpu::parse_backend_choice(*backend);
        o->task_options = task_flags->options();
        return run(*o, *token_file);
      };
    });

}  // namespace
}  // namespace stoa::cli
