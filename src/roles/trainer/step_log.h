// The trainer's step log (<run>/steps.jsonl): one StepRecord per trainer step, written by
// TrainerLoop::log_step and read by `stoa plot`, the demo's report and `stoa bench fleet`, and
// the one summary of a run's steps they all use.
//
// Torch-free: its own library (stoa_step_log, roles/CMakeLists.txt) in every build, so the
// readers and their tests build without the trainer and without the rest of roles/.
//
// Reading is lenient because logs are often read while a run is still writing them or after it
// crashed: a metric absent from a line (an older log) or not a number is NaN, an absent count
// is 0, an absent version -1 and an absent unix_ms nullopt; a line that is not an object with
// an integer "step" is unusable.
#pragma once
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace stoa::trainer {

struct StepRecord {
  int64_t step = 0;          // the ledger's step number
  int64_t version = -1;      // published after the step
  int64_t trainer_step = 0;  // optimiser steps taken, after this one
  int64_t groups = 0;        // groups closed with the step
  int64_t groups_dropped_stale = 0;
  int64_t groups_uniform = 0;  // closed without a trainer pass: every reward equal
  std::map<int64_t, int64_t> staleness_histogram;  // versions behind -> groups
  double reward_mean = 0, loss = 0, lr = 0;
  int64_t sequences = 0, tokens = 0, tokens_total = 0;  // tokens: trainable (loss) tokens
  double masked_fraction = 0, masked_fraction_pos = 0, masked_fraction_neg = 0;
  double tv_mean = 0, tv_max = 0, kl_mean = 0, kl_max = 0;
  double entropy = 0, grad_norm = 0;
  double step_seconds = 0;  // the optimiser step's compute time
  // Of the wall time since the previous step ended (gathering + this step), the share spent
  // computing.
  double busy_fraction = 0;
  int64_t patch_bytes = 0, anchor_bytes = 0;  // 0: none published with this version
  std::optional<int64_t> unix_ms;             // when the line was written
  double elapsed_s = 0;                       // seconds since the trainer process started
};

// Every field under the key it has always had in steps.jsonl (an absent unix_ms is left out).
void to_json(nlohmann::json& j, const StepRecord& r);
// Lenient (see above); throws stoa::Error(kBadFormat) for an unusable line, saying why.
void from_json(const nlohmann::json& j, StepRecord& r);
// The same, without throwing: nullopt with `why` set for an unusable line.
std::optional<StepRecord> step_record_from_json(const nlohmann::json& j, std::string* why);

// A numeric field read leniently, as above: NaN when absent or not a number (null, a string).
// Also for the other JSON logs a run leaves (the demo's eval-*.json read by `stoa plot`).
double json_metric(const nlohmann::json& j, const char* key);

// The wall time a step accounts for: gather wait + compute = step_seconds / busy_fraction
// (step_seconds alone when the busy fraction is absent or 0; 0 when step_seconds is absent).
double step_wall_seconds(const StepRecord& r);

// The learning-speed mark of a run: the mean training reward over kRewardWindow consecutive steps
// first reaching kRewardLevel (at T = 1, so below greedy pass@1).
inline constexpr double kRewardLevel = 0.3;
inline constexpr size_t kRewardWindow = 8;

// Aggregates over a run's steps. Means over nothing are NaN.
struct StepSummary {
  int64_t steps = 0;
  int64_t last_version = -1;
  double tokens_trained = 0;
  // Token-weighted over the steps (a step with more trainable tokens counts more).
  double masked_fraction = NAN, tv_mean = NAN, kl_mean = NAN;
  double compute_seconds = 0;  // Σ step_seconds
  double wall_seconds = 0;     // Σ step_wall_seconds
  // The trainer's busy fraction, time-weighted: Σ compute / Σ (gather wait + compute) — not a
  // mean of the per-step ratios, which would weigh a 0.1 s step like a 10 s one.
  double busy_fraction = NAN;
  double step_seconds_mean = NAN;
  int64_t patches = 0, anchors = 0;  // versions that carried one
  double patch_bytes_mean = NAN, anchor_bytes_mean = NAN;
  int64_t groups_dropped_stale = 0, groups_uniform = 0;
  // Mean reward and TV of the first and last quarter of the steps (at least one step each): does
  // the π–μ divergence grow?
  double reward_first_quarter = NAN, reward_last_quarter = NAN;
  double tv_first_quarter = NAN, tv_last_quarter = NAN;
  // The trainer's elapsed_s when the reward mark was first reached; -1 if never.
  double seconds_to_reward_level = -1;
};

// A metric absent from a record (NaN) counts as 0 in sums and means.
StepSummary summarize_steps(const std::vector<StepRecord>& records);

// A step log read leniently: unusable lines are skipped and counted, with the first few
// reasons ("<path>:<line>: <why>").
struct StepLog {
  std::vector<StepRecord> records;
  int64_t lines = 0;    // non-blank lines
  int64_t skipped = 0;  // unusable lines
  std::vector<std::string> warnings;
};

// From a file; a missing file reads as an empty log when `missing_ok`, else throws kNotFound.
StepLog read_step_log(const std::string& path, bool missing_ok = false);
// From the log's text (`source` names it in warnings).
StepLog parse_step_log(const std::string& text, const std::string& source);

}  // namespace stoa::trainer
