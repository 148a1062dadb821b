// Running a child process to completion: the one-call forms of core/process.h for commands
// that start a program, wait for it and use its exit code, its output or its log.
#pragma once
#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/process.h"

namespace stoa {

struct RunResult {
  ExitStatus status;
  bool timed_out = false;  // the deadline passed and the child was stopped
  std::string out, err;    // the captured streams (OutputTarget::capture())
  double cpu_seconds = 0;
  int64_t peak_rss_bytes = 0;  // the child's VmHWM
};

// Starts argv and waits for it. With a deadline, a child still running when it passes is
// stopped (SIGTERM, then SIGKILL after `grace`) and the result says timed_out. Throws what
// Process::start throws.
RunResult run_process(const std::vector<std::string>& argv, const ProcessOptions& options = {},
                      std::optional<std::chrono::milliseconds> deadline = std::nullopt,
                      std::chrono::milliseconds grace = std::chrono::seconds(1));

// stdout captured, stderr discarded: the output of a command that prints a result.
RunResult run_capture(const std::vector<std::string>& argv);

// Runs a step with stdout and stderr appended to `log_path`; throws kIo naming `what`, its exit
// code and the last lines of the log if it fails. `progress`, when given, is called every
// `every` with the last line of the log (for commands that log one JSON line per step).
void run_child_or_throw(const std::vector<std::string>& argv, const std::string& log_path,
                        const std::string& what,
                        const std::function<void(const std::string& last_line)>& progress = nullptr,
                        std::chrono::milliseconds every = std::chrono::seconds(15));

// The last `lines` lines of a text file, each as "  | line\n" (for error messages).
std::string tail_of_file(const std::string& path, int lines);

}  // namespace stoa
