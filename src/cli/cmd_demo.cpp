// `stoa demo`: PaperSearchQA-mini, an SFT warm start and asynchronous int8 RL with a hub, a trainer
// and N worker processes on loopback; pass@1 before and after (app/demo/demo.h).
#include <memory>

#include "app/demo/demo.h"
#include "cli/command.h"

namespace stoa::cli {
namespace {

CommandRegistration reg(
    "demo",
    "The main job: PaperSearchQA-mini + SFT warm start + asynchronous int8 RL with a hub, a "
    "trainer and N worker processes on loopback; pass@1 before and after",
    [](CLI::App& app) {
      auto o = std::make_shared<app::DemoOptions>();
      o->setup.dir = "stoa-demo";
      app.add_option("--dir", o->setup.dir, "working directory (reused between runs)")
          ->capture_default_str();
      o->rl.minutes = 0;
      app.add_option("--minutes", o->rl.minutes,
                     "RL wall-clock minutes (0: 16 from a warm start, 8 after an SFT here, 24 "
                     "with --full)")
          ->capture_default_str();
      app.add_option("--min-steps", o->rl.min_steps,
                     "past --minutes, RL goes on until the trainer took this many steps (at most "
                     "10 minutes more)")
          ->capture_default_str();
      app.add_option("--warm-start", o->warm_start,
                     "the SFT model to start RL from: auto (the committed assets/warm-start when "
                     "it fits this data and tokenizer, else an SFT here; --full: none), none (SFT "
                     "here), or a model directory with provenance.json (must fit)")
          ->capture_default_str();
      app.add_option("--workers", o->rl.workers, "worker processes")->capture_default_str();
      app.add_option("--json-summary", o->json_summary, "also write the summary JSON here");
      app.add_flag("--full", o->full,
                   "the long run: 4000 demonstrations plus the copy curriculum (SFT batches of "
                   "2048 tokens, stopped at held-out pass@1 0.28), >= 24 RL minutes, the whole "
                   "validation split and the test split once at the end");
      app.add_flag("--fresh", o->fresh,
                   "delete --dir first (otherwise finished stages are reused)");
      app.add_option("--seed", o->setup.seed, "seed of data, model and sampling")
          ->capture_default_str();
      app.add_option("--papers", o->setup.papers, "corpus size")->capture_default_str();
      app.add_option("--questions", o->setup.questions, "questions over all splits")
          ->capture_default_str();
      app.add_flag("--copy-curriculum", o->setup.copy_curriculum,
                   "add the copy curriculum to the SFT data (on with --full)");
      app.add_option("--sft-examples", o->setup.sft_examples, "scripted demonstrations")
          ->capture_default_str();
      app.add_option("--sft-epochs", o->setup.sft_epochs)->capture_default_str();
      app.add_option("--sft-lr", o->setup.sft_lr)->capture_default_str();
      app.add_option("--sft-batch-tokens", o->setup.sft_batch_tokens, "tokens per SFT step")
          ->capture_default_str();
      app.add_option("--sft-target", o->setup.sft_target_pass1,
                     "stop the SFT once pass@1 on held-out train questions reaches this (0: run "
                     "every epoch; --full: 0.28)")
          ->capture_default_str();
      app.add_option("--sft-snapshot-every", o->setup.sft_snapshot_every,
                     "with --sft-target: steps between held-out evaluations")
          ->capture_default_str();
      app.add_option("--sft-probe-questions", o->setup.sft_probe_questions,
                     "with --sft-target: train questions held out of the SFT data to decide on")
          ->capture_default_str();
      app.add_option("--sft-threads", o->setup.threads, "trainer threads during SFT")
          ->capture_default_str();
      app.add_option("--preset", o->setup.preset, "model shape")->capture_default_str();
      app.add_option("--vocab-size", o->setup.vocab_size)->capture_default_str();
      app.add_option("--max-observation-tokens", o->setup.max_observation_tokens)
          ->capture_default_str();
      app.add_option("--eval-limit", o->eval_limit, "validation questions evaluated (0: all)")
          ->capture_default_str();
      app.add_option("--trainer-threads", o->rl.trainer_threads, "trainer threads during RL")
          ->capture_default_str();
      app.add_option("--trainer-ranks", o->rl.trainer_ranks,
                     "data-parallel trainer ranks during RL (`stoa train --nproc`)")
          ->capture_default_str();
      app.add_option("--trainer-dtype", o->rl.trainer_dtype,
                     "the trainer's matmul dtype during RL: f32, or bf16 mixed precision (f32 "
                     "masters, moments and losses)")
          ->capture_default_str();
      app.add_option("--trainer-sharding", o->rl.trainer_sharding,
                     "with --trainer-ranks: zero1 or fsdp (fully sharded masters, gradients and "
                     "moments)")
          ->capture_default_str();
      app.add_option("--worker-threads", o->rl.worker_threads)->capture_default_str();
      app.add_option("--worker-slots", o->rl.worker_slots,
                     "rollouts each worker generates together")
          ->capture_default_str();
      app.add_option("--group-size", o->rl.group_size)->capture_default_str();
      app.add_option("--groups-per-step", o->rl.groups_per_step)->capture_default_str();
      CLI::Option* lr = app.add_option("--lr", o->rl.lr, "RL learning rate")->capture_default_str();
      CLI::Option* lora =
          app.add_option("--lora", o->rl.lora_rank,
                         "train LoRA adapters of this rank (every matrix of the layers, the base "
                         "frozen) instead of every weight; 0: full fine-tuning")
              ->check(CLI::NonNegativeNumber)
              ->capture_default_str();
      // With --lora the rate is --lora-lr's: a --lr beside it, or a LoRA setting without
      // --lora, would go unused without a word, so the parser refuses them.
      lora->excludes(lr);
      app.add_option("--lora-alpha", o->rl.lora_alpha, "with --lora: the adapters' alpha")
          ->check(CLI::PositiveNumber)
          ->capture_default_str()
          ->needs(lora);
      app.add_option("--lora-lr", o->rl.lora_lr, "with --lora: the RL learning rate")
          ->check(CLI::PositiveNumber)
          ->capture_default_str()
          ->needs(lora);
      app.add_flag("!--train-uniform-groups", o->rl.skip_uniform_groups,
                   "also run groups whose rollouts all earned the same reward (zero gradient) "
                   "through the trainer, counting them towards --groups-per-step");
      app.add_option("--loss", o->rl.loss)->capture_default_str();
      app.add_option("--max-staleness", o->rl.max_staleness, "in versions")->capture_default_str();
      app.add_option("--anchor-every", o->rl.anchor_every)->capture_default_str();
      app.add_option("--temperature", o->rl.temperature)->capture_default_str();
      app.add_option("--max-turns", o->rl.episode.max_turns)->capture_default_str();
      app.add_option("--max-new-tokens", o->rl.episode.max_new_tokens)->capture_default_str();
      app.add_option("--verify", o->rl.verify,
                     "fraction of rollouts the hub replays exactly (0: off, 1: every rollout; "
                     "docs/design/verification.md)")
          ->check(CLI::Range(0.0, 1.0))
          ->capture_default_str();
      app.add_flag("--peer-checks", o->rl.peer_checks,
                   "every rollout replayed by another worker before it trains, disagreements "
                   "settled by the hub's own replay ([verify] peer; docs/design/verification.md)");
      app.add_option("--worker-kernel-targets", o->rl.worker_kernel_targets,
                     "force the workers' SIMD kernel targets, round-robin: a comma list (e.g. "
                     "AVX3_DL,AVX2,SSE4) or all (every target this machine has); default: each "
                     "worker on its CPU's best (`stoa work --kernel-target`)");
      app.add_option("--worker-backend", o->rl.worker_backends,
                     "what computes each worker's rollouts, round-robin: a comma list of auto, "
                     "cpu, vulkan (e.g. vulkan,cpu: `stoa work --backend`)");
      return [o] { return app::run_demo(*o); };
    });

}  // namespace
}  // namespace stoa::cli
