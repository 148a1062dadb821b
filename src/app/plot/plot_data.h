// `stoa plot` input: one run's step log (<run>/steps.jsonl, one JSON object per trainer step,
// written by TrainerLoop::log_step) and its eval JSONs (`stoa eval --json`, e.g.
// <demo>/logs/eval-before.json), read into plain series. Torch-free and gnuplot-free, so it is
// unit-tested on its own.
//
// Logs are read leniently because they are often read while a run is still writing them or
// after it crashed: a line that is not a JSON object, or lacks "step", is skipped and counted
// (a half-written last line is the common case); a run with no usable step is an error.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace stoa::app::plot {

// One trainer step. Metrics absent from the line (older logs) are NaN.
struct StepPoint {
  int64_t step = 0;
  int64_t version = -1;
  // Seconds on the run's wall-clock axis (see RunData::clock); NaN when unknown.
  double wall_s = 0;
  double reward_mean = 0;
  double masked_fraction = 0, masked_fraction_pos = 0, masked_fraction_neg = 0;
  double tv_mean = 0, tv_max = 0, kl_mean = 0, kl_max = 0;
  double busy_fraction = 0;
  double step_seconds = 0;
  double patch_bytes = 0, anchor_bytes = 0;  // 0: none published with this version
  double tokens = 0;                         // trainable tokens of the step
  double groups_dropped_stale = 0;           // groups the staleness rule dropped before it
  double groups_uniform = 0;  // closed without a trainer pass: every reward equal (zero gradient)
  std::map<int64_t, int64_t> staleness;  // versions behind -> groups trained
  double elapsed_s = 0, unix_ms = 0;     // as logged (NaN when absent)
};

// One pass@1 measurement placed on the run's step and wall-clock axes.
struct EvalPoint {
  std::string file;   // the JSON it came from
  std::string split;  // "validation", "test", ... ("" when the JSON does not say)
  double pass1 = 0;
  int64_t step = 0;
  double wall_s = 0;
};

// Where the wall-clock axis of a run comes from, best first.
enum class ClockSource {
  kElapsed,    // "elapsed_s" written by the trainer
  kUnixMs,     // "unix_ms", relative to the first step
  kEstimated,  // no wall-clock in the log: sum of step_seconds / busy_fraction
};
const char* clock_source_name(ClockSource c);

struct RunData {
  std::string label;
  std::string dir;         // as given
  std::string steps_path;  // the steps.jsonl read
  std::vector<StepPoint> steps;
  std::vector<EvalPoint> evals;  // sorted by step
  ClockSource clock = ClockSource::kElapsed;
  int64_t lines_skipped = 0;          // malformed or unusable step-log lines
  std::vector<std::string> warnings;  // what was skipped and why (first few lines, bad evals)
};

// Reads a run. `dir` is a run directory (holding steps.jsonl) or a demo directory (holding
// run/steps.jsonl). Eval JSONs are taken from <demo>/logs/eval-*.json, where <demo> is `dir`
// or, for a run directory, its parent. Throws kNotFound (no directory / no steps.jsonl) or
// kBadFormat (no usable step) naming the path.
RunData load_run(const std::string& dir, const std::string& label);

// Parses one step-log line; nullopt (with `why` set) when it is unusable.
std::optional<StepPoint> parse_step_line(const std::string& line, std::string* why);

// The label a run gets when none is given: the directory name, or the demo directory's name
// for <demo>/run.
std::string default_label(const std::string& dir);

}  // namespace stoa::app::plot
