// What `stoa demo` prints while RL runs and the summary it ends with, computed from the run's
// own records: the hub's /v1/status (counters, workers) and the trainer's JSONL step log.
#pragma once
#include <string>

#include <nlohmann/json.hpp>

namespace stoa::cli {

// One progress line from a /v1/status document (elapsed seconds of RL given).
std::string rl_progress_line(const nlohmann::json& status, double elapsed_s);

// Aggregates of <run>/steps.jsonl: steps, versions, token-weighted DPPO masked fraction, TV and
// KL, mean patch bytes (versions shipped as patches), compute seconds, mean reward of the first
// and last quarter of steps. Missing file or lines that are not JSON objects are skipped.
nlohmann::json summarize_step_log(const std::string& steps_jsonl);

}  // namespace stoa::cli
