// `stoa plot` input: one run's step log (<run>/steps.jsonl, one JSON object per trainer step,
// written by TrainerLoop::log_step) and its eval JSONs (`stoa eval --json`, e.g.
// <demo>/logs/eval-before.json), read into plain series. Torch-free and gnuplot-free, so it is
// unit-tested on its own.
//
// Logs are read leniently (trainer::read_step_log) because they are often read while a run is
// still writing them or after it crashed: a line that is not a JSON object, or lacks "step", is
// skipped and counted (a half-written last line is the common case); a run with no usable step
// is an error.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "roles/trainer/step_log.h"

namespace stoa::app::plot {

// One trainer step (roles/trainer/step_log.h: metrics absent from the line are NaN) placed on
// the run's wall-clock axis.
struct StepPoint : trainer::StepRecord {
  // Seconds on the run's wall-clock axis (see RunData::clock); NaN when unknown.
  double wall_s = 0;
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
  kEstimated,  // no wall-clock in the log: sum of trainer::step_wall_seconds
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
