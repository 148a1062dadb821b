#include "app/demo/sft_to_target.h"

#include <signal.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "app/demo/demo_report.h"
#include "core/error.h"
#include "core/process.h"
#include "core/process_run.h"

namespace stoa::app {
namespace fs = std::filesystem;
namespace {

// Complete lines appended to a log since the last call (a partial last line waits).
class LogFollower {
 public:
  explicit LogFollower(std::string path) : path_(std::move(path)) {}

  std::vector<std::string> new_lines() {
    std::vector<std::string> out;
    std::ifstream in(path_, std::ios::binary);
    if (!in.good()) return out;
    in.seekg(static_cast<std::streamoff>(offset_));
    std::string chunk((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    size_t start = 0;
    for (size_t nl = chunk.find('\n'); nl != std::string::npos; nl = chunk.find('\n', start)) {
      out.push_back(chunk.substr(start, nl - start));
      start = nl + 1;
    }
    offset_ += start;
    return out;
  }

 private:
  std::string path_;
  size_t offset_ = 0;
};

}  // namespace

SftToTargetResult sft_to_target(const SftToTargetOptions& o, const Say& say) {
  STOA_CHECK(o.snapshot_every > 0 && o.target > 0 && o.target <= 1, ErrorKind::kInvalidArgument,
             "sft to target: snapshot_every must be > 0 and the target in (0, 1]");
  std::vector<std::string> argv = o.train_argv;
  argv.insert(argv.end(), {"--snapshot-every", std::to_string(o.snapshot_every)});
  fs::remove(o.log_path);
  Process sft = Process::start(argv, logged_to(o.log_path));
  LogFollower follow(o.log_path);
  SftToTargetResult result;
  std::string chosen, snapshots_root;
  auto last_progress = std::chrono::steady_clock::now();
  std::optional<int> exit_code;
  while (chosen.empty()) {
    exit_code = sft.wait_for(std::chrono::milliseconds(500));
    for (const std::string& line : follow.new_lines()) {
      const auto j = nlohmann::json::parse(line, nullptr, false);
      if (!j.is_object() || !chosen.empty()) continue;
      if (j.contains("snapshot")) {
        const std::string dir = j.at("snapshot").get<std::string>();
        const int64_t step = j.value("step", int64_t{0});
        snapshots_root = fs::path(dir).parent_path().string();
        if (!exit_code) sft.signal(SIGSTOP);  // the probe gets the cores; the SFT waits
        EvalRun probe = o.probe;
        probe.model = dir;
        const std::string name = o.probe_log_dir + "/probe-step-" + std::to_string(step);
        probe.json_out = name + ".json";
        const double pass1 = run_eval(probe, name + ".log").at("pass1").get<double>();
        if (!exit_code) sft.signal(SIGCONT);
        result.curve.push_back({step, pass1});
        char buf[160];
        std::snprintf(buf, sizeof buf, "sft: step %lld  held-out pass@1 %.3f (target %.3f)",
                      static_cast<long long>(step), pass1, o.target);
        say(buf);
        if (pass1 >= o.target) {
          chosen = dir;
          result = {true, step, pass1, result.curve};
        } else {
          fs::remove_all(dir);
        }
      } else if (j.contains("step") &&
                 std::chrono::steady_clock::now() - last_progress > std::chrono::seconds(30)) {
        last_progress = std::chrono::steady_clock::now();
        say(sft_progress_line(j));
      }
    }
    if (exit_code) break;
  }
  if (!chosen.empty()) {
    if (!exit_code) sft.stop(std::chrono::seconds(10));
    fs::remove_all(o.out);
    fs::rename(chosen, o.out);
  } else {
    STOA_CHECK(*exit_code == 0, ErrorKind::kIo, "stoa train --sft failed (exit code ", *exit_code,
               "); the end of ", o.log_path, ":\n", tail_of_file(o.log_path, 15));
    result.reached = false;
    result.pass1 = -1;  // the final model comes after the last snapshot: not probed
    say("sft: the held-out target was not reached; the warm start is the SFT's final model");
  }
  if (!snapshots_root.empty()) fs::remove_all(snapshots_root);
  return result;
}

}  // namespace stoa::app
