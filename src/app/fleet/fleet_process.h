// Child processes of `stoa bench fleet`: each runs the `stoa` binary itself (run / work / data
// preparation) through core/process (own process group, log file), optionally inside a
// network namespace, and dies with the bench (PR_SET_PDEATHSIG) if the bench is killed without
// unwinding. The destructor terminates the whole group (SIGTERM, then SIGKILL after a grace).
#pragma once
#include <algorithm>
#include <atomic>
#include <chrono>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/process.h"

namespace stoa::app::fleet {

inline std::string self_exe() {
  return self_executable();
}

inline std::string read_file_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline std::string tail_of(const std::string& text, size_t n = 1500) {
  return text.size() <= n ? text : "..." + text.substr(text.size() - n);
}

struct ChildSpec {
  std::vector<std::string> args;  // after the executable
  std::string log_path;           // stdout + stderr
  std::string netns;              // empty: the bench's own network namespace
};

class Child {
 public:
  Child() = default;
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;
  ~Child() { terminate(std::chrono::seconds(5)); }

  void start(const std::string& exe, ChildSpec spec) {
    spec_ = std::move(spec);
    std::vector<std::string> argv = {exe};
    argv.insert(argv.end(), spec_.args.begin(), spec_.args.end());
    ProcessOptions options = logged_to(spec_.log_path, /*truncate=*/true);
    options.netns = spec_.netns;
    options.die_with_parent = true;
    process_ = Process::start(argv, options);
  }

  bool running() { return process_.running(); }

  // SIGTERM to the group, up to `grace` for it to exit, then SIGKILL. Returns the exit code
  // (128 + signal when killed; -1 when never started).
  int terminate(std::chrono::milliseconds grace) {
    if (process_.pid() <= 0) return -1;
    if (auto code = process_.poll()) return *code;
    return process_.stop(grace);
  }

  // Waits for the child to exit on its own (data preparation steps); throws with the log's tail
  // when it fails or outlives `limit`. `interrupted` (optional) ends the wait early, as a failure.
  void wait_ok(std::chrono::seconds limit, const std::string& what,
               const std::atomic<bool>* interrupted = nullptr) {
    // Woken by the exit; `interrupted` (a signal handler's flag) is looked at every 50 ms.
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (process_.running() && std::chrono::steady_clock::now() < deadline &&
           !(interrupted && interrupted->load()))
      process_.wait_for(std::min<std::chrono::milliseconds>(
          std::chrono::milliseconds(50), std::chrono::duration_cast<std::chrono::milliseconds>(
                                             deadline - std::chrono::steady_clock::now())));
    const bool late = process_.running();
    const int code = late ? process_.stop(std::chrono::seconds(1)) : process_.wait();
    STOA_CHECK(!late && code == 0, ErrorKind::kInternal, "bench fleet: ", what,
               late ? " did not finish in time" : " failed", " (log ", spec_.log_path, "):\n",
               tail_of(read_file_text(spec_.log_path)));
  }

  double cpu_seconds() const { return process_.cpu_seconds(); }  // user + system, once reaped
  const std::string& log_path() const { return spec_.log_path; }

 private:
  ChildSpec spec_;
  Process process_;
};

}  // namespace stoa::app::fleet
