// `stoa train`: RL from a run config — the hub + trainer of roles/run/hub_and_trainer.h (same as
// `stoa run`), or with --hub the trainer alone dialing out to `stoa hub` (roles/run/split_run.h) —
// or the supervised warm start (app/sft/sft_job.h); --nproc N starts N local ranks
// (app/ranks/local_ranks.h).
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "app/eval/run_eval.h"
#include "app/ranks/local_ranks.h"
#include "app/sft/sft_job.h"
#include "cli/command.h"
#include "core/error.h"
#include "core/machine.h"
#include "roles/run/hub_and_trainer.h"
#include "roles/run/run_log.h"
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
  std::string memory_report;  // a directory: each rank's rank-R.json with its peak memory
  app::SftJobOptions job;
};

// Each rank's peak resident set (VmHWM) against its resident set before the trainer existed:
// what `stoa bench train --plan --measure` compares with the plan.
void write_memory_report(const std::string& dir, int rank, int world, uint64_t rss_before) {
  const ProcessMemory now = own_process_memory();
  nlohmann::json report = {{"rank", rank},
                           {"world", world},
                           {"rss_before_bytes", rss_before},
                           {"hwm_bytes", now.hwm_bytes},
                           {"hwm_growth_bytes", now.hwm_bytes - rss_before}};
  std::filesystem::create_directories(dir);
  std::ofstream out(std::filesystem::path(dir) / ("rank-" + std::to_string(rank) + ".json"));
  out << report.dump() << "\n";
  STOA_CHECK(out.good(), ErrorKind::kIo, "cannot write the memory report in ", dir);
}

int run_train(const Options& o) {
  STOA_CHECK(o.nproc >= 1, ErrorKind::kInvalidArgument, "stoa train: --nproc must be >= 1");
  const train::RendezvousOptions rendezvous = train::rendezvous_from_env();
  if (o.nproc > 1 && rendezvous.world_size == 1) return app::launch_local_ranks(o.nproc);
  const uint64_t rss_before = own_process_memory().rss_bytes;
  auto report = [&] {
    if (!o.memory_report.empty())
      write_memory_report(o.memory_report, rendezvous.rank, rendezvous.world_size, rss_before);
  };
  std::shared_ptr<train::Communicator> ranks;
  if (rendezvous.world_size > 1) {
    ranks = train::connect_ranks(rendezvous);
    if (rendezvous.rank != 0) {
      train::Trainer::follow(ranks);  // rank 0 reads the data, hosts the hub and publishes
      report();
      return 0;
    }
  }
  if (!o.config.empty()) {
    STOA_CHECK(!o.sft, ErrorKind::kInvalidArgument,
               "stoa train: --config (RL: hub + trainer) and --sft are different jobs");
    run::open_run_log(run::load_run_config(o.config), o.hub.empty() ? "run" : "trainer", o.config);
    // Rank 0's peak here holds the hub too when it runs in this process.
    const int status =
        !o.hub.empty()
            ? run::run_trainer_alone(o.config, o.hub, o.max_steps, ranks, app::held_out_eval)
            : run::run_hub_and_trainer(o.config, o.max_steps, ranks, app::held_out_eval);
    report();
    return status;
  }
  STOA_CHECK(o.sft, ErrorKind::kInvalidArgument,
             "stoa train: give --config run.toml (RL: hub + asynchronous DPPO trainer) or --sft");
  app::SftJobOptions job = o.job;
  job.ranks = ranks;
  const int status = app::run_sft_job(job);
  report();
  return status;
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
      app.add_option("--sharding", o->job.sharding,
                     "Across ranks: zero1 (AdamW moments divided) or fsdp (masters, gradients "
                     "and moments divided; the model streamed into the shards)")
          ->capture_default_str();
      app.add_option("--seed", o->job.seed, "Data-order seed")->capture_default_str();
      app.add_option("--lora-rank", o->job.lora.rank,
                     "LoRA: adapters of this rank on the frozen model (0: full fine-tuning)")
          ->capture_default_str();
      app.add_option("--lora-alpha", o->job.lora.alpha, "LoRA: alpha (scale alpha / rank)")
          ->capture_default_str();
      app.add_option("--lora-targets", o->job.lora.targets,
                     "LoRA: target modules (all-linear, or names such as q_proj,w1)")
          ->delimiter(',');
      app.add_option("--lora-base-dtype", o->job.lora_base_dtype,
                     "LoRA: the frozen base's dtype (bf16, f32)")
          ->capture_default_str();
      app.add_option("--lora-init", o->job.lora.init_adapter,
                     "LoRA: start the adapters from this PEFT adapter directory (its rank, alpha "
                     "and targets must be these)");
      app.add_option("--checkpoint", o->job.checkpoint,
                     "Write an exact checkpoint here every epoch");
      app.add_option("--resume", o->job.resume, "Continue from a checkpoint directory");
      app.add_option("--snapshot-every", o->job.snapshot_every,
                     "Also write the model to <out>-snapshots/step-<N> every N steps");
      app.add_flag("--json", o->job.json, "One JSON line of metrics per step on stdout");
      app.add_option("--memory-report", o->memory_report,
                     "Each rank writes rank-R.json here at the end: its peak resident set (VmHWM) "
                     "and its resident set before the trainer");
      return [o] { return run_train(*o); };
    });

}  // namespace
}  // namespace stoa::cli
