// The reinforcement-learning half of `stoa demo` and `stoa experiment ablations`: one RL phase
// = `stoa run` (hub + DPPO trainer) and N `stoa work` processes on loopback for a fixed wall-clock
// budget, then a clean stop (workers first, so nothing they finished is lost; then the trainer,
// after its current step); and pass@1 evaluation through `stoa eval`.
#pragma once
#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "app/demo/demo_setup.h"

namespace stoa::app {

// The episode limits shared by RL sampling and evaluation (they must agree).
struct EpisodeLimits {
  int max_turns = 2;
  int max_new_tokens = 64;
  int max_observation_tokens = 256;
};

struct RlOptions {
  double minutes = 8;
  // Past `minutes`, RL goes on until the trainer has taken this many steps (at most 10 minutes
  // more): a loaded machine still trains, where a fixed time alone could end with none.
  int min_steps = 0;
  int workers = 4;
  int worker_threads = 1;
  // libtorch's OpenMP barriers spin: with workers on the same cores, one trainer thread is far
  // faster than two (docs/design/train.md).
  int trainer_threads = 1;
  // > 1: the trainer runs data parallel on this many local ranks (`stoa train --nproc`).
  int trainer_ranks = 1;
  // The trainer's matmul dtype ([trainer] dtype): "f32", or "bf16" mixed precision.
  std::string trainer_dtype = "f32";
  // How the ranks divide the training state ([trainer] sharding): "zero1" or "fsdp".
  std::string trainer_sharding = "zero1";
  int worker_slots = 8;
  int group_size = 8;
  int groups_per_step = 4;
  // Groups whose rollouts all earned the same reward (zero gradient) are closed with the step
  // without running through the trainer, and do not count towards groups_per_step
  // (trainer_loop.h): the trainer is the demo's bottleneck, the workers idle ~80 % of the time.
  bool skip_uniform_groups = true;
  double lr = 2e-4;
  // `stoa demo --lora RANK`: > 0 trains LoRA adapters of this rank on every matrix of the layers
  // ([trainer.lora], all-linear) over a frozen base held in the trainer's dtype, at lora_lr;
  // the version published and evaluated is the merged W + (alpha/rank)·B·A. 0: full fine-tuning
  // at lr. alpha 32 with a learning rate 10x full fine-tuning's follows "LoRA Without Regret"
  // (Thinking Machines Lab, 2025): with the 1/rank scale the best LoRA rate is ~10x FullFT's and
  // nearly independent of the rank, and RL learns even at very low ranks.
  int lora_rank = 0;
  double lora_alpha = 32;
  double lora_lr = 2e-3;
  int max_staleness = 2;
  std::string loss = "dppo-binary-tv";
  // DPPO trust-region threshold δ (both sides); 0 keeps the trainer's default (0.15, the TV
  // value). The KL variants want ~0.05 (reference.md).
  double delta = 0;
  // Ratio cap C of the truncated-IS baseline (0: not written; that loss refuses an infinite cap).
  double ratio_cap = 0;
  int anchor_every = 20;
  // Anchors kept in the blob store (0: the trainer's default). Full-weight sync = anchor_every 1
  // AND keep_anchors 1: otherwise the hub's route planner still serves the cheaper patch.
  int keep_anchors = 0;
  // Sampling temperature of the rollouts (the trainer scores at the same one). 0.7: from the same
  // 36 % warm start, 20 RL minutes reached 58.2 % validation pass@1 at 0.7 and 55.4 % at 1.0
  // (docs/results.md §0) — at 1.0 the small model's samples earn a third of its greedy reward.
  double temperature = 0.7;
  uint64_t seed = 1;
  EpisodeLimits episode;
  // Replay verification ([verify] of the run config): the fraction of rollouts the hub replays
  // (0: off; 1: every rollout). docs/design/verification.md.
  double verify = 0;
  // Peer checks ([verify] peer): every rollout past a worker's first ones replayed by another
  // worker, disagreements settled by the hub's replay. Turns verification on.
  bool peer_checks = false;
  // `stoa demo --worker-kernel-targets`: "" (every worker on its CPU's best target), "all", or a
  // comma list of kernel targets, assigned to the workers round-robin (worker_targets.h).
  std::string worker_kernel_targets;
  // `stoa demo --worker-backend`: what computes each worker's rollouts (`stoa work --backend`),
  // a comma list assigned round-robin, e.g. "vulkan,cpu"; "" leaves each on `stoa work`'s
  // default.
  std::string worker_backends;
};

struct RlResult {
  nlohmann::json last_status;  // the hub's /v1/status just before it stopped
  double seconds = 0;          // RL wall clock (workers started → everything stopped)
  double worker_idle_fraction = 0;
  int workers_failed = 0;
  // The kernel target each worker was forced onto (empty: none forced).
  std::vector<std::string> worker_kernel_targets;
  std::vector<std::string> worker_backends;  // each worker's --backend (empty: the default)
  // The worker processes' own user + system CPU seconds (wait4's rusage when they exited):
  // what generation cost, measured.
  double worker_cpu_seconds = 0;
  // <run_dir>/checkpoint/model (LoRA: <run_dir>/merged, the base + adapters merged), with the
  // tokenizer copied in.
  std::string final_model;
};

using Say = std::function<void(const std::string&)>;

// Runs one RL phase from `model_dir` into `run_dir` (recreated), logs into `logs_dir`.
// Throws stoa::Error (with the end of the failing process's log) if the hub/trainer fails or no
// step finished; a worker that dies is reported and the phase continues without it.
RlResult run_rl_phase(const RlOptions& options, const DemoPaths& paths,
                      const std::string& model_dir, const std::string& run_dir,
                      const std::string& logs_dir, const Say& say,
                      const std::atomic<bool>& interrupted);

// Removes the previous RL phase's logs from `logs` (run*.log, worker-*.log; created if missing),
// leaving everything else — a run directory inside it included.
void clear_phase_logs(const std::string& logs);

// The run.toml of one RL phase (hub, sampling, trainer, PULSE) as `stoa run` reads it.
void write_run_config(const RlOptions& options, const DemoPaths& paths,
                      const std::string& model_dir, const std::string& run_dir,
                      const std::string& path, const std::string& join_token);

// One `stoa eval` run as a child process's command line (the demo's evaluations and
// `stoa experiment mismatch` sample through it). Empty index: <data>/index; empty outputs: none.
struct EvalRun {
  std::string model, data, index, split = "validation";
  std::string questions;  // a QA JSONL file instead of the split (`stoa eval --questions`)
  int64_t limit = 0;      // 0: every question
  bool int8 = true;       // the worker's weights
  double temperature = 0;
  uint64_t seed = 0;
  EpisodeLimits episode;
  std::string json_out, rollouts;
};
std::vector<std::string> eval_command(const EvalRun& run);
// Runs `stoa eval` to completion (its output in log_path) and returns the JSON it wrote to
// run.json_out (which must be set). Throws kIo naming the failure and the end of the log.
nlohmann::json run_eval(const EvalRun& run, const std::string& log_path);

// pass@1 (greedy, int8 weights as a worker holds them) of a model on a split; `limit` 0 = all.
// Writes <logs_dir>/<name>.json.
double evaluate_pass1(const DemoPaths& paths, const std::string& model_dir,
                      const std::string& split, int64_t limit, const EpisodeLimits& episode,
                      const std::string& logs_dir, const std::string& name, const Say& say);

// The summary fields of one RL phase (steps, versions, rollouts, masked fraction, patch bytes,
// busy/idle fractions, ...), from its step log and the hub's last status.
nlohmann::json rl_summary(const RlOptions& options, const RlResult& result,
                          const std::string& run_dir);

}  // namespace stoa::app
