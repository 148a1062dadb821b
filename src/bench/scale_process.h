// Child processes for `stoa bench scale`: each measured step runs as its own process (the
// model maker, the worker), so its peak RSS is its own and not the bench's. A child's memory is
// read from /proc/<pid>/status while it runs (VmRSS now, VmHWM its peak so far) and from
// wait4's rusage when it ends.
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

namespace stoa::bench {

struct ProcessMemory {
  uint64_t rss_bytes = 0;  // VmRSS
  uint64_t hwm_bytes = 0;  // VmHWM: the peak RSS so far
};
// Zeros when the process is gone.
ProcessMemory read_process_memory(pid_t pid);
// False once the process has exited (a zombie not yet reaped counts as exited).
bool process_alive(pid_t pid);

struct ChildResult {
  int exit_status = -1;        // the exit code, or 128 + signal
  uint64_t max_rss_bytes = 0;  // rusage ru_maxrss
  double seconds = 0;
};

// A running child whose stderr (and stdout) lines are handed to `on_line` by a reader thread.
class ChildProcess {
 public:
  using LineHandler = std::function<void(const std::string& line)>;
  ChildProcess(const std::vector<std::string>& argv, LineHandler on_line);
  ~ChildProcess();  // kills and reaps a child still running
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  pid_t pid() const { return pid_; }
  void signal(int sig);
  // Waits up to `timeout` (then SIGKILL) and reaps.
  ChildResult wait(std::chrono::seconds timeout);

 private:
  pid_t pid_ = -1;
  int pipe_fd_ = -1;
  std::chrono::steady_clock::time_point start_;
  std::thread reader_;
  bool reaped_ = false;
  ChildResult result_;
};

// Runs a child to completion, its output appended to `log` (capped).
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

// This binary's path (/proc/self/exe), to start its own subcommands.
std::string self_binary();

}  // namespace stoa::bench
