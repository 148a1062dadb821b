// What `stoa demo` prints while RL runs and the summary it ends with, computed from the run's
// own records: the hub's /v1/status (counters, workers) and the trainer's JSONL step log.
#pragma once
#include <cstddef>
#include <string>

#include <nlohmann/json.hpp>

#include "roles/trainer/step_log.h"

namespace stoa::app {

// One SFT progress line ("sft: step N  epoch E  loss L  lr X") from a `stoa train --sft --json`
// step line.
std::string sft_progress_line(const nlohmann::json& step_line);

// One progress line from a /v1/status document (elapsed seconds of RL given).
std::string rl_progress_line(const nlohmann::json& status, double elapsed_s);

// The learning-speed mark of a run (roles/trainer/step_log.h).
using trainer::kRewardLevel;
using trainer::kRewardWindow;

// trainer::summarize_steps of <run>/steps.jsonl as JSON: steps, versions, token-weighted DPPO
// masked fraction, TV and KL, mean patch bytes (versions shipped as patches), compute and wall
// seconds and the time-weighted busy fraction (compute / wall), mean reward and TV of the first
// and last quarter of steps (does the π–μ divergence grow?), and the trainer's elapsed seconds
// when the reward mark was reached (-1: never). Missing file or lines that are not JSON objects
// are skipped; a figure over no steps is 0.
nlohmann::json summarize_step_log(const std::string& steps_jsonl);

// What replay verification cost against what generation cost, from the hub's counters
// (/v1/status "counters": rollouts_verified, verification_cpu_seconds, rollouts_accepted,
// rollouts_rejected) and the worker processes' own CPU seconds (their rusage): generation_cpu_s,
// validation_cpu_s, each per rollout (generation over the rollouts submitted — accepted or
// rejected, both were generated —, validation over the rollouts replayed) and
// validation_cpu_fraction, the second over the first (issue 19's target: <= 0.10). A figure over
// no rollouts is 0.
nlohmann::json verification_cost(const nlohmann::json& counters, double generation_cpu_s);

// The plain-words lines of the summary for replay verification and its cost: the verdicts (by
// kernel target when the summary has rollouts_verified_by_target) and the CPU figures of
// verification_cost. Empty when the summary has no generation_cpu_s.
std::string verification_summary_lines(const nlohmann::json& summary);

// An earlier results file (`stoa experiment ablations`' ablations.json) if its "comparability"
// object equals `key` (same warm start and budget), so its rows may stand beside a new run's;
// null when the file is missing, unreadable, not JSON or from another setting.
nlohmann::json read_comparable_results(const std::string& path, const nlohmann::json& key);

}  // namespace stoa::app
