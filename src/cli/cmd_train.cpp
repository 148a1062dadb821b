// `stoa train`: RL from a run config (the hub + trainer of roles/run/hub_and_trainer.h, same as
// `stoa run`) or the supervised warm start (app/sft/sft_job.h).
#include <csignal>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "app/sft/sft_job.h"
#include "cli/command.h"
#include "core/error.h"
#include "core/log.h"
#include "core/process.h"
#include "roles/run/hub_and_trainer.h"
#include "roles/run/split_run.h"
#include "train/distributed.h"
#include "train/trainer.h"

namespace stoa::cli {
namespace {

struct Options {
  int nproc = 1;  // local ranks this command starts (data-parallel trainer)
  bool sft = false;
  std::string config;  // RL: the hub + trainer of a run config
  std::string hub;     // RL with the hub apart: its trainer join string or URL
  int64_t max_steps = -1;
  app::SftJobOptions job;
};

// This command's own arguments without --nproc, for its ranks.
std::vector<std::string> rank_argv() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::string> args;
  for (size_t at = 0; at < all.size();) {
    const size_t end = all.find('\0', at);
    args.push_back(all.substr(at, end - at));
    at = end == std::string::npos ? all.size() : end + 1;
  }
  std::vector<std::string> argv{self_executable()};
  for (size_t i = 1; i < args.size(); ++i) {
    if (args[i] == "--nproc") {
      ++i;  // and its value
    } else if (args[i].rfind("--nproc=", 0) != 0) {
      argv.push_back(args[i]);
    }
  }
  return argv;
}

volatile std::sig_atomic_t g_launcher_signal = 0;
void on_launcher_signal(int sig) {
  g_launcher_signal = sig;
}

// `--nproc N`: N ranks of this same command on this machine, torchrun's way: RANK, WORLD_SIZE,
// LOCAL_RANK, MASTER_ADDR, MASTER_PORT in their environment, the TCPStore hosted here (the
// agent store). The first rank to fail stops the others (SIGTERM, then SIGKILL after a grace
// period): a dead rank never leaves the rest waiting. SIGINT/SIGTERM go to rank 0, which stops
// after its step and releases the others.
int launch_ranks(int nproc) {
  train::RendezvousServer store(nproc);
  const std::vector<std::string> argv = rank_argv();
  std::vector<Process> ranks;
  ProcessOptions options;
  options.die_with_parent = true;
  for (int r = 0; r < nproc; ++r) {
    setenv("RANK", std::to_string(r).c_str(), 1);
    setenv("LOCAL_RANK", std::to_string(r).c_str(), 1);
    setenv("WORLD_SIZE", std::to_string(nproc).c_str(), 1);
    setenv("MASTER_ADDR", "127.0.0.1", 1);
    setenv("MASTER_PORT", std::to_string(store.port()).c_str(), 1);
    setenv("TORCHELASTIC_USE_AGENT_STORE", "True", 1);
    ranks.push_back(Process::start(argv, options));
    log_info("train", "rank ", r, " of ", nproc, " pid ", ranks.back().pid());
  }
  std::signal(SIGINT, on_launcher_signal);
  std::signal(SIGTERM, on_launcher_signal);
  int status = 0;
  bool forwarded = false;
  std::vector<bool> done(ranks.size(), false);
  std::chrono::steady_clock::time_point failed_at{};
  for (size_t left = ranks.size(); left > 0;) {
    if (g_launcher_signal != 0 && !forwarded) {
      ranks[0].signal(static_cast<int>(g_launcher_signal));
      forwarded = true;
    }
    for (size_t r = 0; r < ranks.size(); ++r) {
      if (done[r]) continue;
      const std::optional<int> code = ranks[r].poll();
      if (!code) continue;
      done[r] = true;
      --left;
      if (*code != 0 && status == 0) {
        status = *code;
        failed_at = std::chrono::steady_clock::now();
        log_error("train", "rank ", r, " exited with status ", *code, "; stopping the other ranks");
        for (size_t other = 0; other < ranks.size(); ++other) {
          if (!done[other]) ranks[other].signal(SIGTERM);
        }
      }
    }
    if (status != 0 && std::chrono::steady_clock::now() - failed_at > std::chrono::seconds(10)) {
      for (size_t r = 0; r < ranks.size(); ++r) {
        if (!done[r]) ranks[r].signal(SIGKILL);
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return status == 0 ? 0 : 1;
}

int run_train(const Options& o) {
  STOA_CHECK(o.nproc >= 1, ErrorKind::kInvalidArgument, "stoa train: --nproc must be >= 1");
  const train::RendezvousOptions rendezvous = train::rendezvous_from_env();
  if (o.nproc > 1 && rendezvous.world_size == 1) return launch_ranks(o.nproc);
  std::shared_ptr<train::Communicator> ranks;
  if (rendezvous.world_size > 1) {
    ranks = train::connect_ranks(rendezvous);
    if (rendezvous.rank != 0) {
      train::Trainer::follow(ranks);  // rank 0 reads the data, hosts the hub and publishes
      return 0;
    }
  }
  if (!o.config.empty()) {
    STOA_CHECK(!o.sft, ErrorKind::kInvalidArgument,
               "stoa train: --config (RL: hub + trainer) and --sft are different jobs");
    if (!o.hub.empty()) return run::run_trainer_alone(o.config, o.hub, o.max_steps, ranks);
    return run::run_hub_and_trainer(o.config, o.max_steps, ranks);
  }
  STOA_CHECK(o.sft, ErrorKind::kInvalidArgument,
             "stoa train: give --config run.toml (RL: hub + asynchronous DPPO trainer) or --sft");
  app::SftJobOptions job = o.job;
  job.ranks = ranks;
  return app::run_sft_job(job);
}

const CommandRegistration registration(
    "train",
    "Train the policy: RL from a run config (--config run.toml: the hub + asynchronous DPPO "
    "trainer, same as `stoa run`) or a supervised warm start (--sft)",
    [](CLI::App& app) {
      auto o = std::make_shared<Options>();
      app.add_option("--config", o->config, "run.toml: RL with the hub (see `stoa run`)");
      app.add_option("--hub", o->hub,
                     "With --config: dial out to a hub started apart (`stoa hub --config`): its "
                     "trainer join string (hub.json \"trainer_join\"), or its URL with [hub] "
                     "trainer_token");
      app.add_option("--max-steps", o->max_steps,
                     "With --config: stop after this many ledger steps (overrides the config)");
      app.add_flag("--sft", o->sft, "Supervised fine-tuning on JSONL transcripts");
      app.add_option("--nproc", o->nproc,
                     "Data-parallel ranks to start on this machine (or run under torchrun's "
                     "RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT)")
          ->capture_default_str();
      app.add_option("--data", o->job.data,
                     "JSONL transcripts (tokens/mask, prompt/completion or "
                     "messages; see src/train/sft_data.h)");
      app.add_option("--model", o->job.model, "Hugging Face model directory to start from");
      app.add_option("--out", o->job.out, "Where to write the trained model directory");
      app.add_option("--epochs", o->job.epochs, "Passes over the data")->capture_default_str();
      app.add_option("--lr", o->job.lr, "Peak learning rate")->capture_default_str();
      app.add_option("--batch-tokens", o->job.batch_tokens, "Tokens per optimiser step")
          ->capture_default_str();
      app.add_option("--micro-batch-tokens", o->job.micro_batch_tokens,
                     "Padded tokens per forward/backward chunk")
          ->capture_default_str();
      app.add_option("--warmup", o->job.warmup, "Linear warm-up steps")->capture_default_str();
      app.add_option("--schedule", o->job.schedule, "constant or cosine")->capture_default_str();
      app.add_option("--weight-decay", o->job.weight_decay, "AdamW decoupled weight decay")
          ->capture_default_str();
      app.add_option("--max-grad-norm", o->job.max_grad_norm, "Gradient-norm clip (<= 0: off)")
          ->capture_default_str();
      app.add_option("--device", o->job.device, "cpu, cuda or cuda:N")->capture_default_str();
      app.add_option("--dtype", o->job.dtype, "Matmul dtype: f32 or bf16 (master weights stay f32)")
          ->capture_default_str();
      app.add_option("--threads", o->job.threads, "libtorch intra-op threads (0: default)");
      app.add_option("--seed", o->job.seed, "Data-order seed")->capture_default_str();
      app.add_option("--checkpoint", o->job.checkpoint,
                     "Write an exact checkpoint here every epoch");
      app.add_option("--resume", o->job.resume, "Continue from a checkpoint directory");
      app.add_option("--snapshot-every", o->job.snapshot_every,
                     "Also write the model to <out>-snapshots/step-<N> every N steps");
      app.add_flag("--json", o->job.json, "One JSON line of metrics per step on stdout");
      return [o] { return run_train(*o); };
    });

}  // namespace
}  // namespace stoa::cli
