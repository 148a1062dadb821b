// Child processes: the one way Stoa starts another program. A child gets an argv (never a
// shell: no quoting, no word splitting), stdin from /dev/null, and stdout / stderr each
// inherited, discarded, written to a file or captured into a string. By default it runs in a
// process group of its own, so a signal or the destructor's kill reaches whatever it started
// too, and the parent's terminal stays free of its output. Optionally it dies with its parent
// (PR_SET_PDEATHSIG) and runs inside a named network namespace (`stoa bench fleet`'s emulated
// home links). The destructor kills a child that is still running: an orchestrator that fails
// half-way never leaves a hub or a worker behind.
//
// Waiting is on events: a child with captured output is waited on with poll() over its pipes,
// so a chatty child never blocks on a full pipe while the parent waits.
#pragma once
#include <sys/resource.h>
#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace stoa {

// Where a child's stdout or stderr goes.
struct OutputTarget {
  enum class Kind {
    kInherit,  // the parent's own stream
    kDiscard,  // /dev/null
    kFile,     // `path`, appended to (or truncated first)
    kCapture,  // a pipe read into a string (Process::captured_out / captured_err)
    kStdout,   // stderr only: wherever stdout goes (2>&1)
  };
  Kind kind = Kind::kInherit;
  std::string path;
  bool truncate = false;

  static OutputTarget inherit() { return {}; }
  static OutputTarget discard() { return {Kind::kDiscard, {}, false}; }
  static OutputTarget file(std::string path, bool truncate = false) {
    return {Kind::kFile, std::move(path), truncate};
  }
  static OutputTarget capture() { return {Kind::kCapture, {}, false}; }
  static OutputTarget same_as_stdout() { return {Kind::kStdout, {}, false}; }
};

struct ProcessOptions {
  OutputTarget out;
  OutputTarget err;
  // A process group of its own (setpgid): signal() and the destructor then reach the child's
  // own children too. Off only for a child that must stay in the caller's group.
  bool own_process_group = true;
  // PR_SET_PDEATHSIG(SIGKILL): the child dies even if the parent is killed without unwinding.
  // Linux ties this to the thread that started the child: start long-lived children from a
  // thread that outlives them (the main thread).
  bool die_with_parent = false;
  // Enter the network namespace /run/netns/<netns> before exec; the child exits with 125
  // (writing why to its stderr) if it cannot.
  std::string netns;
  // chdir before exec ("" keeps the parent's); the child exits with 126 if it cannot.
  std::string working_dir;
};

// stdout and stderr appended (or truncated first) to one log file: the usual way to run a step.
ProcessOptions logged_to(const std::string& log_path, bool truncate = false);

// How a child ended.
struct ExitStatus {
  int code = -1;   // the exit code, or 128 + the signal number when a signal killed it
  int signal = 0;  // the signal that killed it; 0 when it exited
  bool signaled() const { return signal != 0; }
};

class Process {
 public:
  // Starts argv[0] with the arguments. argv[0] is a path, or a bare name looked up on PATH (in
  // the parent, before fork). An executable that does not exist or cannot be run is not an
  // error here: the child exits with 127 and says so on its stderr, as a shell would. Throws
  // kInvalidArgument for an empty argv and kIo when an output file cannot be opened or fork
  // fails.
  static Process start(const std::vector<std::string>& argv, const ProcessOptions& options = {});

  Process() = default;
  Process(Process&& other) noexcept;
  Process& operator=(Process&& other) noexcept;
  Process(const Process&) = delete;
  Process& operator=(const Process&) = delete;
  ~Process();  // SIGKILLs the child (its group) if still running, then reaps

  pid_t pid() const { return pid_; }
  // The file stdout goes to ("" when it does not go to a file).
  const std::string& log_path() const { return log_path_; }
  bool running();
  // The exit code once it has exited (reaping it), nullopt while it runs.
  std::optional<int> poll();
  // Waits for the exit; returns the exit code.
  int wait();
  // Waits up to `timeout`; nullopt if it is still running then.
  std::optional<int> wait_for(std::chrono::milliseconds timeout);
  // The full status once reaped.
  std::optional<ExitStatus> exit_status() const { return status_; }
  // Sends a signal to the child's process group (to the child alone without one).
  void signal(int sig);
  // SIGTERM, up to `grace` for it to exit, then SIGKILL. Returns the exit code.
  int stop(std::chrono::milliseconds grace);
  // User + system CPU seconds of the child (not its own children) once it has been reaped; 0
  // before.
  double cpu_seconds() const { return cpu_seconds_; }
  // The child's peak resident set (its VmHWM, from wait4's ru_maxrss) once reaped; 0 before.
  int64_t peak_rss_bytes() const { return peak_rss_bytes_; }
  // What a kCapture stream has delivered so far (all of it once the child has been reaped).
  const std::string& captured_out() const { return captured_[0]; }
  const std::string& captured_err() const { return captured_[1]; }

 private:
  pid_t pid_ = -1;
  int pidfd_ = -1;  // readable once the child exits (pidfd_open); -1 where the kernel lacks it
  bool own_group_ = true;
  std::optional<ExitStatus> status_;
  std::string log_path_;
  double cpu_seconds_ = 0;
  int64_t peak_rss_bytes_ = 0;
  int capture_fd_[2] = {-1, -1};  // read ends of the stdout / stderr pipes (-1: none)
  std::string captured_[2];

  void reaped(int status, const struct rusage& usage);
  bool try_reap();  // non-blocking; true once status_ is set
  // Waits up to `timeout_ms` (-1: no limit) for the exit or for captured output, reading what
  // arrived.
  void wait_events(int timeout_ms);
  void read_captures();  // what the pipes hold now; closes a pipe at end of file
  void close_fds();
  void kill_and_reap();
};

// The path of the running executable (/proc/self/exe), to start sibling commands.
std::string self_executable();

// The path of an executable: `program` itself when it contains a '/', else the first match on
// PATH. Empty when there is none.
std::string find_executable(const std::string& program);

}  // namespace stoa
