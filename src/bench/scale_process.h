// Child processes for `stoa bench scale`: each measured step runs as its own process (the
// model maker, the worker), so its peak RSS is its own and not the bench's. The children are
// started by core/process.h (the one spawner); this file adds what the bench needs on top: a
// child's log lines as they come (the worker says when it generates with each version), a
// sampler of its VmRSS between phases, and the result as the bench reports it. A child's
// memory is read from /proc/<pid>/status while it runs (core/machine.h) and from wait4's rusage
// when it ends.
#pragma once
#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/machine.h"
#include "core/process.h"

namespace stoa::bench {

// False once the process has exited (a zombie not yet reaped counts as exited). Reads /proc and
// never reaps, so another thread may ask while the owner waits.
bool process_alive(pid_t pid);

struct ChildResult {
  int exit_status = -1;        // the exit code, or 128 + signal
  uint64_t max_rss_bytes = 0;  // rusage ru_maxrss
  double seconds = 0;
  double cpu_seconds = 0;  // user + system, the child's own (wait4's rusage)
};

// A running child whose stdout and stderr go to `log_path` (truncated first); a thread follows
// that file and hands each complete line to `on_line` as it is written. The child dies with the
// bench (PR_SET_PDEATHSIG): start it from the main thread.
class ChildProcess {
 public:
  using LineHandler = std::function<void(const std::string& line)>;
  ChildProcess(const std::vector<std::string>& argv, const std::string& log_path,
               LineHandler on_line);
  ~ChildProcess();  // kills and reaps a child still running
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  pid_t pid() const { return pid_; }
  void signal(int sig);
  // Waits up to `timeout` (then SIGKILL) and reaps; every line of the log has been handed on
  // when it returns.
  ChildResult wait(std::chrono::seconds timeout);

 private:
  void follow(const std::string& log_path, LineHandler on_line);
  Process process_;
  pid_t pid_ = -1;
  std::chrono::steady_clock::time_point start_;
  std::atomic<bool> reaped_{false};
  std::thread follower_;
  ChildResult result_;
};

// Runs a child to completion, its output (stdout and stderr) appended to `log` (capped at 1 MiB).
ChildResult run_child(const std::vector<std::string>& argv, std::string* log,
                      std::chrono::seconds timeout);

// Samples a process's VmRSS every `interval` in a thread: the largest value seen since the
// last take_peak().
class RssSampler {
 public:
  RssSampler(pid_t pid, std::chrono::milliseconds interval);
  ~RssSampler();
  uint64_t take_peak();  // returns and resets the window's largest VmRSS (also samples now)

 private:
  void take_peak_sample();
  pid_t pid_;
  std::atomic<bool> stop_{false};
  std::mutex mutex_;
  uint64_t peak_ = 0;
  std::thread thread_;
};

}  // namespace stoa::bench
