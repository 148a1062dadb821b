// Synthetic run logs for the plot tests: a steps.jsonl shaped like TrainerLoop::log_step's
// and eval JSONs shaped like `stoa eval --json`'s, in a fresh temporary directory.
#pragma once
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

namespace stoa::app::plot::testing {

class TempDir {
 public:
  explicit TempDir(const std::string& tag) {
    path_ = std::filesystem::temp_directory_path() /
            ("stoa-plot-" + tag + "-" + std::to_string(::getpid()));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

inline void write_file(const std::filesystem::path& p, const std::string& text) {
  std::filesystem::create_directories(p.parent_path());
  std::ofstream(p) << text;
}

// One step line: reward climbing, an anchor every 10 versions, staleness 0..2.
inline nlohmann::json step_json(int step, double elapsed_s, bool wall_clock = true) {
  nlohmann::json j = {{"step", step},
                      {"version", step},
                      {"groups", 4},
                      {"groups_dropped_stale", step % 7 == 0 ? 1 : 0},
                      {"staleness_histogram", {{"0", 2}, {"1", 1}, {"2", step % 2}}},
                      {"reward_mean", 0.3 + 0.01 * step},
                      {"loss", 0.1},
                      {"masked_fraction", 0.003},
                      {"masked_fraction_pos", 0.002},
                      {"masked_fraction_neg", 0.004},
                      {"tv_mean", 0.01},
                      {"tv_max", 0.2},
                      {"kl_mean", 0.001},
                      {"kl_max", 0.05},
                      {"entropy", 1.2},
                      {"grad_norm", 0.7},
                      {"step_seconds", 2.0},
                      {"busy_fraction", 0.8},
                      {"patch_bytes", 40000 + 100 * step},
                      {"anchor_bytes", step % 10 == 0 ? 4000000 : 0}};
  if (wall_clock) {
    j["elapsed_s"] = elapsed_s;
    j["unix_ms"] = int64_t{1'800'000'000'000} + static_cast<int64_t>(elapsed_s * 1000);
  }
  return j;
}

inline std::string steps_text(int first, int last, double elapsed0, bool wall_clock = true) {
  std::string out;
  for (int s = first; s <= last; s++)
    out += step_json(s, elapsed0 + 2.5 * (s - first + 1), wall_clock).dump() + "\n";
  return out;
}

inline std::string eval_json(double pass1, const std::string& split = "validation") {
  return nlohmann::json({{"model", "m"}, {"split", split}, {"questions", 50}, {"pass1", pass1}})
      .dump(2);
}

// A `stoa demo` directory: run/steps.jsonl and logs/eval-{before,after}.json.
inline void write_demo(const std::filesystem::path& dir, int steps, double before, double after) {
  write_file(dir / "run" / "steps.jsonl", steps_text(1, steps, 10.0));
  write_file(dir / "logs" / "eval-before.json", eval_json(before));
  write_file(dir / "logs" / "eval-after.json", eval_json(after));
}

// True when the file exists and starts with the 8-byte PNG signature.
inline bool is_png(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  char sig[8] = {};
  in.read(sig, 8);
  return in.gcount() == 8 && std::string(sig, 8) == std::string("\x89PNG\r\n\x1a\n", 8);
}

}  // namespace stoa::app::plot::testing
