// The run configuration of `stoa run --config run.toml` (the hub + trainer process), in TOML:
// read by parse_run_config and written only by to_toml (the demo, the fleet bench and the
// integration tests build a RunConfig in code), so the writer cannot drift from the reader.
// Unknown keys are errors (a typo must not silently fall back to a default), and every value is
// range-checked by the options it lands in. Paths are relative to the TOML file's directory.
//
//   [run]      dir (ledger, blobs, checkpoint, steps.jsonl), model (initial HF model dir),
//              data (train.jsonl), task (a name in env/tasks/builtin_tasks.h), max_steps
//   [task]     the task's options (strings, numbers or booleans; the task says which it
//              accepts and which are paths — resolved like the others); e.g. search: index
//   [hub]      host, port, join_token, tls_cert, tls_key, threads, group_size, lease_ttl_s,
//              lease_max_s, max_open_groups, max_queued_groups (default: groups_per_step ×
//              ceil(max_staleness / 2)), max_tokens, topk, seed,
//              heartbeat_interval_s (workers heartbeat twice per interval), operator_token,
//              trainer_token, session_ttl_s, worker_expiry_s, and per rate limit (join_per_ip,
//              lease_per_worker, lease_per_ip, rollouts_per_worker, rollouts_per_ip,
//              task_per_worker) <limit>_per_s, <limit>_burst, header_timeout_s, body_timeout_s,
//              idle_timeout_s, max_connections_per_ip, fair leasing (docs/design/hub.md):
//              max_leases_per_worker (default 4), max_leases_per_address (8; loopback peers exempt,
//              IPv6 by /64), max_leases_per_token (0: no cap), and the hoarding deadline — a lease
//              with no accepted rollout for hoard_grace_s (120) + max_turns × max_new_tokens /
//              hoard_min_tokens_per_s (1.0; 0 turns revocation off) seconds is revoked, the
//              swarm (swarm, swarm_web_seed_copies, swarm_web_seed_budget, swarm_reseed_after_s)
//              and what the hub sends each worker of a blob (fetches_per_blob, fetch_refill_s)
//   [sampling] temperature, top_p, top_k, max_new_tokens, max_turns, max_observation_tokens
//   [trainer]  device, dtype (f32 or bf16: the matmuls' dtype; masters, moments, losses and
//              ratios stay f32), threads, lr, weight_decay, max_grad_norm, warmup_steps,
//              micro_batch_tokens, seed, loss, delta_hi, delta_lo, clip_eps_hi, clip_eps_lo,
//              ratio_cap, advantage, aggregation, groups_per_step, min_groups,
//              gather_timeout_ms, max_staleness, checkpoint_every
//   [trainer.lora] rank, alpha, dropout, target_modules, base_dtype: LoRA, on when present
//              (read and written by run_config_lora.h; one process, zero1)
//   [pulse]    anchor_every, keep_anchors
//   [verify]   enabled, fraction, first_rollouts, max_wait_s, train_on_timeout, threads,
//              max_queue, remote, job_lease_s (replay verification: docs/design/verification.md).
//              enabled defaults to true when [hub] host is beyond loopback (hub::is_loopback_host),
//              false on loopback; off beyond loopback only by an explicit `enabled = false`, which
//              the hub warns about at start and in /v1/status (verification.warning)
//   [eval]     every_steps (0: none), questions, limit, pass_at, samples, temperature,
//              success_reward, batch, seed: a held-out evaluation of the published weights
//              during the run (roles/trainer/held_out_eval.h), the run's task and [sampling]
//              turn budgets
// Each key is named once, in run_config.cpp's key lists, which the reader and the writer both
// walk. docs/run-config.md lists every key with its default (a test checks it against this
// parser).
#pragma once
#include <cstddef>
#include <optional>
#include <string>

#include "env/task_registry.h"
#include "roles/hub/http/server.h"
#include "roles/hub/hub.h"
#include "roles/trainer/trainer_loop.h"
#include "train/train_options.h"

namespace stoa::run {

// [eval]: what `stoa eval` would be given (app/eval/eval.h), every `every_steps` steps.
struct RunEvalConfig {
  int64_t every_steps = 0;  // 0: no held-out evaluation
  // The held-out question file (QA JSONL; resolved like the other paths). Empty: <[run] data>/
  // val.jsonl, or validation.jsonl where only that exists (stoa eval's default split).
  std::string questions;
  int64_t limit = 0;  // the first `limit` questions (0: all)
  int pass_at = 1;    // k of the pass@k reported beside pass@1 and the mean reward
  int samples = 0;    // per question (0: pass_at); more than 1 needs temperature > 0
  double temperature = 0;
  double success_reward = 1.0;  // a sample is a success for pass@k at reward >= this
  int batch = 16;               // episodes advanced together
  uint64_t seed = 0;
};

struct RunConfig {
  std::string run_dir;
  std::string model_dir;
  std::string data_dir;
  std::string task;  // the registry's name ([run] task, required)
  // [task]: the task's options, paths resolved; the hub sends the run's share of them to workers
  // (TaskRegistry::run_options) and keeps the local ones (where its own tools are) for itself.
  env::TaskOptions task_options;
  hub::HubConfig hub;  // ledger_path filled from run_dir
  hub::ServerOptions server;
  train::TrainOptions train;
  trainer::TrainerLoopOptions loop;  // checkpoint_dir / log_path filled from run_dir
  // [hub] max_queued_groups as the file gives it; unset, hub.max_queued_groups follows from the
  // staleness window (see run_config.cpp).
  std::optional<size_t> max_queued_groups;
  // [verify] enabled as the file gives it; unset, hub.verify.enabled follows from [hub] host
  // (on beyond loopback). to_toml writes the key when set or when hub.verify.enabled differs
  // from the host's default.
  std::optional<bool> verify_enabled;
  std::optional<bool> verify_peer;  // [verify] peer as the file says it (unset: the host decides)
  RunEvalConfig eval;
};

// Throws kInvalidArgument naming the file and the key for an unknown key, a wrong type or an
// out-of-range value; kNotFound / kBadFormat for a missing or malformed file.
RunConfig load_run_config(const std::string& path);
RunConfig parse_run_config(const std::string& text, const std::string& source,
                           const std::string& base_dir);

// The TOML text of every key the file carries; the values derived while parsing (the ledger,
// checkpoint and log paths, the hub's staleness bound, the trainer's temperature, a default
// max_queued_groups and topk) are left to the reader. parse_run_config(to_toml(c)) gives back c.
// Throws kInvalidArgument for a value the file cannot hold (a lease time not in whole seconds).
std::string to_toml(const RunConfig& config);
// Writes `header` (comment lines without the '#') and to_toml(config) to `path`; kIo on failure.
void save_run_config(const RunConfig& config, const std::string& path,
                     const std::string& header = "");

}  // namespace stoa::run
