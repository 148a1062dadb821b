#include "app/plot/plot_data.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <regex>

#include <nlohmann/json.hpp>

#include "core/enum_names.h"
#include "core/error.h"

namespace stoa::app::plot {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr size_t kMaxWarnings = 8;  // per run: enough to see the pattern, not a flood

void warn(RunData& run, std::string message) {
  if (run.warnings.size() < kMaxWarnings) run.warnings.push_back(std::move(message));
}

std::string find_steps(const std::string& dir) {
  STOA_CHECK(fs::is_directory(dir), ErrorKind::kNotFound, "plot: run directory ", dir,
             " does not exist");
  for (const fs::path& p : {fs::path(dir) / "steps.jsonl", fs::path(dir) / "run" / "steps.jsonl"})
    if (fs::is_regular_file(p)) return p.string();
  fail(ErrorKind::kNotFound, "plot: no step log in ", dir, " (looked for ", dir,
       "/steps.jsonl and ", dir, "/run/steps.jsonl)");
}

// The wall-clock axis, from the best source every step has. A resumed trainer appends to the
// same log with elapsed_s restarting near zero; its steps continue from where the previous
// process stopped rather than overlapping it.
ClockSource assign_wall_clock(std::vector<StepPoint>& steps) {
  const bool all_elapsed = std::all_of(steps.begin(), steps.end(),
                                       [](const StepPoint& s) { return !std::isnan(s.elapsed_s); });
  const bool all_unix = std::all_of(steps.begin(), steps.end(),
                                    [](const StepPoint& s) { return s.unix_ms.has_value(); });
  if (all_elapsed) {
    double offset = 0, prev = 0;
    for (auto& s : steps) {
      if (s.elapsed_s < prev) offset += prev;
      prev = s.elapsed_s;
      s.wall_s = offset + s.elapsed_s;
    }
    return ClockSource::kElapsed;
  }
  if (all_unix) {
    // The first step ended step_seconds after it began; start the axis there.
    const double first_len =
        std::isnan(steps.front().step_seconds) ? 0 : steps.front().step_seconds;
    const double t0 = static_cast<double>(*steps.front().unix_ms) / 1000.0 - first_len;
    for (auto& s : steps) s.wall_s = static_cast<double>(*s.unix_ms) / 1000.0 - t0;
    return ClockSource::kUnixMs;
  }
  double t = 0;
  for (auto& s : steps) {
    t += trainer::step_wall_seconds(s);
    s.wall_s = t;
  }
  return ClockSource::kEstimated;
}

// Wall time at `step`: that of the last logged step not after it (0 before the first).
double wall_at(const std::vector<StepPoint>& steps, int64_t step) {
  double w = 0;
  for (const auto& s : steps) {
    if (s.step > step) break;
    w = s.wall_s;
  }
  return w;
}

// Places an eval JSON on the step axis: its own "step" field, else its name (eval-before: 0,
// eval-after / eval-final: the last step, eval-<N> / eval-step-<N>: N); a test-split eval
// without a step is the final report.
std::optional<int64_t> eval_step(const json& j, const std::string& stem, int64_t last_step) {
  if (auto it = j.find("step"); it != j.end() && it->is_number_integer()) return it->get<int64_t>();
  if (stem == "eval-before") return 0;
  // The test split is evaluated once, at the end (not a point on the held-out curve).
  if (j.value("split", std::string()) == "test") return last_step;
  if (stem == "eval-after" || stem == "eval-final") return last_step;
  static const std::regex numbered(R"(eval-(?:step-?)?(\d+))");
  std::smatch m;
  if (std::regex_match(stem, m, numbered)) return std::stoll(m[1].str());
  return std::nullopt;
}

void load_evals(RunData& run, const fs::path& demo_dir) {
  const fs::path logs = demo_dir / "logs";
  if (!fs::is_directory(logs)) return;
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(logs)) {
    const std::string name = e.path().filename().string();
    if (e.is_regular_file() && name.rfind("eval-", 0) == 0 && e.path().extension() == ".json")
      files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  const int64_t last_step = run.steps.back().step;
  for (const auto& f : files) {
    std::ifstream in(f);
    json j = json::parse(in, nullptr, /*allow_exceptions=*/false);
    if (!j.is_object() || !j.contains("pass1") || !j["pass1"].is_number()) {
      warn(run, cat(f.string(), ": not an eval JSON with a numeric \"pass1\"; skipped"));
      continue;
    }
    const auto step = eval_step(j, f.stem().string(), last_step);
    if (!step) {
      warn(run,
           cat(f.string(), ": no \"step\" field and the name does not say which step; skipped"));
      continue;
    }
    EvalPoint e;
    e.file = f.string();
    e.split = j.value("split", std::string());
    e.pass1 = j["pass1"].get<double>();
    e.step = *step;
    const double given = trainer::json_metric(j, "elapsed_s");
    if (!std::isnan(given))
      e.wall_s = given;
    else if (f.stem() == "eval-before")
      e.wall_s = 0;
    else
      e.wall_s = wall_at(run.steps, e.step);
    run.evals.push_back(std::move(e));
  }
  std::stable_sort(run.evals.begin(), run.evals.end(),
                   [](const EvalPoint& a, const EvalPoint& b) { return a.step < b.step; });
}

}  // namespace

constexpr EnumName<ClockSource> kClockSourceNames[] = {
    {ClockSource::kElapsed, "elapsed_s"},
    {ClockSource::kUnixMs, "unix_ms"},
    {ClockSource::kEstimated, "estimated from step_seconds/busy_fraction"}};

const char* clock_source_name(ClockSource c) {
  return enum_name(kClockSourceNames, c);
}

std::optional<StepPoint> parse_step_line(const std::string& line, std::string* why) {
  auto record = trainer::step_record_from_json(json::parse(line, nullptr, false), why);
  if (!record) return std::nullopt;
  StepPoint s;
  static_cast<trainer::StepRecord&>(s) = std::move(*record);
  return s;
}

std::string default_label(const std::string& dir) {
  fs::path p = fs::path(dir).lexically_normal();
  if (!p.has_filename()) p = p.parent_path();  // "dir/" normalises to "dir/" with an empty name
  if (p.filename() == "run" && p.has_parent_path()) p = p.parent_path();
  std::string name = p.filename().string();
  if (name.empty() || name == "." || name == "..") name = fs::absolute(p).filename().string();
  return name.empty() ? "run" : name;
}

RunData load_run(const std::string& dir, const std::string& label) {
  RunData run;
  run.dir = dir;
  run.label = label.empty() ? default_label(dir) : label;
  run.steps_path = fs::absolute(find_steps(dir)).lexically_normal().string();
  trainer::StepLog log = trainer::read_step_log(run.steps_path);
  for (auto& r : log.records) {
    StepPoint s;
    static_cast<trainer::StepRecord&>(s) = std::move(r);
    run.steps.push_back(std::move(s));
  }
  run.lines_skipped = log.skipped;
  for (auto& w : log.warnings) warn(run, std::move(w));
  STOA_CHECK(!run.steps.empty(), ErrorKind::kBadFormat, "plot: ", run.steps_path,
             " has no usable step (", log.lines, " line(s), ", run.lines_skipped, " malformed)");
  run.clock = assign_wall_clock(run.steps);
  // A demo directory holds run/ and logs/; a run directory given directly sits inside one.
  const fs::path steps_dir = fs::path(run.steps_path).parent_path();
  load_evals(run,
             fs::is_directory(fs::path(dir) / "logs") ? fs::path(dir) : steps_dir.parent_path());
  return run;
}

}  // namespace stoa::app::plot
