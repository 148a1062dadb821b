// Child processes of `stoa bench fleet`: each runs the `stoa` binary itself (run / work / data
// preparation) in its own process group, optionally inside a network namespace, with stdout and
// stderr in a log file. The parent always cleans up: the destructor terminates the whole group
// (SIGTERM, then SIGKILL after a grace period), and PR_SET_PDEATHSIG kills a child if the bench
// itself dies without unwinding (kill -9).
// Header-only: the cli's CMake builds only cmd_*.cpp, and this is not a command.
#pragma once
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "core/error.h"

namespace stoa::cli::fleet {

inline std::string self_exe() {
  std::error_code ec;
  auto p = std::filesystem::read_symlink("/proc/self/exe", ec);
  STOA_CHECK(!ec, ErrorKind::kIo, "bench fleet: cannot read /proc/self/exe: ", ec.message());
  return p.string();
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
    // Everything the child needs is prepared before fork: between fork and exec only
    // async-signal-safe calls are allowed (the bench has threads).
    std::vector<std::string> all = {exe};
    all.insert(all.end(), spec_.args.begin(), spec_.args.end());
    std::vector<char*> argv;
    for (auto& a : all) argv.push_back(a.data());
    argv.push_back(nullptr);
    const std::string ns_path = spec_.netns.empty() ? "" : "/run/netns/" + spec_.netns;
    const int log_fd =
        ::open(spec_.log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    STOA_CHECK(log_fd >= 0, ErrorKind::kIo, "bench fleet: cannot write ", spec_.log_path, ": ",
               std::strerror(errno));
    const pid_t parent = ::getpid();
    const pid_t pid = ::fork();
    if (pid < 0) {
      ::close(log_fd);
      fail(ErrorKind::kIo, "bench fleet: fork: ", std::strerror(errno));
    }
    if (pid == 0) {
      ::setpgid(0, 0);
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent) ::_exit(126);  // the bench died before prctl took effect
      ::dup2(log_fd, 1);
      ::dup2(log_fd, 2);
      if (!ns_path.empty()) {
        const int ns = ::open(ns_path.c_str(), O_RDONLY | O_CLOEXEC);
        if (ns < 0 || ::setns(ns, CLONE_NEWNET) != 0) {
          static const char msg[] = "bench fleet: cannot enter the network namespace\n";
          (void)!::write(2, msg, sizeof msg - 1);
          ::_exit(125);
        }
      }
      ::execv(argv[0], argv.data());
      static const char msg[] = "bench fleet: exec failed\n";
      (void)!::write(2, msg, sizeof msg - 1);
      ::_exit(127);
    }
    ::close(log_fd);
    ::setpgid(pid, pid);  // also here, so kill(-pid) works even before the child ran
    pid_ = pid;
  }

  bool running() {
    if (pid_ <= 0) return false;
    int status = 0;
    rusage ru{};
    const pid_t r = ::wait4(pid_, &status, WNOHANG, &ru);
    if (r == pid_) {
      reaped(status, ru);
      return false;
    }
    return true;
  }

  // SIGTERM to the group, up to `grace` for it to exit, then SIGKILL. Returns the exit status
  // (-1 when it had to be killed or was never started).
  int terminate(std::chrono::milliseconds grace) {
    if (pid_ <= 0) return exit_status_;
    if (running()) {
      ::kill(-pid_, SIGTERM);
      const auto deadline = std::chrono::steady_clock::now() + grace;
      while (running() && std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      if (pid_ > 0) {
        ::kill(-pid_, SIGKILL);
        int status = 0;
        rusage ru{};
        if (::wait4(pid_, &status, 0, &ru) == pid_) reaped(status, ru);
        killed_ = true;
      }
    }
    return exit_status_;
  }

  // Waits for the child to exit on its own (data preparation steps); throws with the log's tail
  // when it fails or outlives `limit`.
  // `interrupted` (optional) ends the wait early, as a failure.
  void wait_ok(std::chrono::seconds limit, const std::string& what,
               const std::atomic<bool>* interrupted = nullptr) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (running() && std::chrono::steady_clock::now() < deadline &&
           !(interrupted && interrupted->load()))
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    if (pid_ > 0) terminate(std::chrono::seconds(1));
    STOA_CHECK(exit_status_ == 0 && !killed_, ErrorKind::kInternal, "bench fleet: ", what,
               killed_ ? " did not finish in time" : " failed", " (log ", spec_.log_path, "):\n",
               tail_of(read_file_text(spec_.log_path)));
  }

  bool exited() const { return pid_ <= 0 && started_once(); }
  int exit_status() const { return exit_status_; }
  double cpu_seconds() const { return cpu_seconds_; }  // user + system, once reaped
  const std::string& log_path() const { return spec_.log_path; }

 private:
  bool started_once() const { return !spec_.log_path.empty(); }
  void reaped(int status, const rusage& ru) {
    exit_status_ = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    cpu_seconds_ = static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
                   static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
    pid_ = -1;
  }

  ChildSpec spec_;
  pid_t pid_ = -1;
  int exit_status_ = -1;
  bool killed_ = false;
  double cpu_seconds_ = 0;
};

}  // namespace stoa::cli::fleet
