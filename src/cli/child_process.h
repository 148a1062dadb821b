// Child processes for the commands that orchestrate other `stoa` commands (`stoa demo`): each
// child runs in its own process group with stdout and stderr appended to a log file, so a
// child's own children (none today) die with it and the parent's terminal stays readable. The
// destructor kills a child that is still running: an orchestrator that fails half-way never
// leaves a hub or a worker behind.
#pragma once
#include <sys/resource.h>
#include <sys/types.h>

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace stoa::cli {

// The path of the running executable (/proc/self/exe), to start sibling commands.
std::string self_executable();

struct ChildOptions {
  // Enter the network namespace /run/netns/<netns> before exec (`stoa bench fleet`'s emulated
  // home links); the child exits with 125 if it cannot.
  std::string netns;
  // PR_SET_PDEATHSIG(SIGKILL): the child dies even if the parent is killed without unwinding.
  bool die_with_parent = false;
  bool truncate_log = false;  // default: append to the log
};

class ChildProcess {
 public:
  // Starts argv[0] (a path) with the arguments; stdout and stderr go to log_path.
  // Throws kIo if the process cannot be started.
  static ChildProcess start(const std::vector<std::string>& argv, const std::string& log_path,
                            const ChildOptions& options = {});

  ChildProcess() = default;
  ChildProcess(ChildProcess&& other) noexcept;
  ChildProcess& operator=(ChildProcess&& other) noexcept;
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;
  ~ChildProcess();  // SIGKILLs the group if still running, then reaps

  pid_t pid() const { return pid_; }
  const std::string& log_path() const { return log_path_; }
  bool running();
  // The exit code (128 + signal number when killed by a signal) once it has exited.
  std::optional<int> poll();
  int wait();
  // Waits up to `timeout`; nullopt if it is still running then.
  std::optional<int> wait_for(std::chrono::milliseconds timeout);
  // Sends a signal to the child's process group.
  void signal(int sig);
  // SIGTERM, up to `grace` for it to exit, then SIGKILL. Returns the exit code.
  int stop(std::chrono::milliseconds grace);
  // User + system CPU seconds of the child (not its own children) once it has been reaped; 0
  // before.
  double cpu_seconds() const { return cpu_seconds_; }

 private:
  pid_t pid_ = -1;
  std::optional<int> status_;
  std::string log_path_;
  double cpu_seconds_ = 0;
  void reaped(int status, const struct rusage& usage);
};

// Runs a command to completion; throws kIo naming the command, its exit code and the last lines
// of its log if it fails. `progress`, when given, is called every `every` with the last line of
// the log (for commands that log one JSON line per step).
void run_child_or_throw(const std::vector<std::string>& argv, const std::string& log_path,
                        const std::string& what,
                        const std::function<void(const std::string& last_line)>& progress = nullptr,
                        std::chrono::milliseconds every = std::chrono::seconds(15));

// The last `lines` lines of a text file (for error messages).
std::string tail_of_file(const std::string& path, int lines);

}  // namespace stoa::cli
