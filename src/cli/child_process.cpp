#include "cli/child_process.h"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <thread>

#include "core/error.h"

namespace stoa::cli {
namespace {

int exit_code_of(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}

}  // namespace

std::string self_executable() {
  std::error_code ec;
  auto p = std::filesystem::read_symlink("/proc/self/exe", ec);
  STOA_CHECK(!ec, ErrorKind::kIo, "cannot resolve /proc/self/exe: ", ec.message());
  return p.string();
}

ChildProcess ChildProcess::start(const std::vector<std::string>& argv, const std::string& log_path,
                                 const ChildOptions& options) {
  STOA_CHECK(!argv.empty(), ErrorKind::kInvalidArgument, "ChildProcess: empty command");
  const int log_fd =
      ::open(log_path.c_str(),
             O_WRONLY | O_CREAT | O_CLOEXEC | (options.truncate_log ? O_TRUNC : O_APPEND), 0644);
  STOA_CHECK(log_fd >= 0, ErrorKind::kIo, "cannot open log ", log_path, ": ", std::strerror(errno));
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  // Everything the child needs is prepared before fork: between fork and exec only
  // async-signal-safe calls are allowed (the parent may have threads).
  const std::string ns_path = options.netns.empty() ? "" : "/run/netns/" + options.netns;
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) {
    const int e = errno;
    ::close(log_fd);
    fail(ErrorKind::kIo, "cannot start ", argv[0], ": fork: ", std::strerror(e));
  }
  if (pid == 0) {
    // Child: only async-signal-safe calls until exec.
    ::setpgid(0, 0);
    if (options.die_with_parent) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent) ::_exit(126);  // the parent died before prctl took effect
    }
    ::dup2(log_fd, STDOUT_FILENO);
    ::dup2(log_fd, STDERR_FILENO);
    if (!ns_path.empty()) {
      const int ns = ::open(ns_path.c_str(), O_RDONLY | O_CLOEXEC);
      if (ns < 0 || ::setns(ns, CLONE_NEWNET) != 0) {
        const char msg[] = "cannot enter the network namespace\n";
        (void)!::write(STDERR_FILENO, msg, sizeof msg - 1);
        ::_exit(125);
      }
    }
    const int devnull = ::open("/dev/null", O_RDONLY);
    if (devnull >= 0) ::dup2(devnull, STDIN_FILENO);
    ::execv(args[0], args.data());
    const char msg[] = "exec failed\n";
    (void)!::write(STDERR_FILENO, msg, sizeof msg - 1);
    ::_exit(127);
  }
  ::setpgid(pid, pid);  // also from the parent: no race with an early signal()
  ::close(log_fd);
  ChildProcess c;
  c.pid_ = pid;
  c.log_path_ = log_path;
  return c;
}

ChildProcess::ChildProcess(ChildProcess&& other) noexcept
    : pid_(other.pid_),
      status_(other.status_),
      log_path_(std::move(other.log_path_)),
      cpu_seconds_(other.cpu_seconds_) {
  other.pid_ = -1;
}

void ChildProcess::reaped(int status, const struct rusage& usage) {
  status_ = exit_code_of(status);
  cpu_seconds_ = static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
                 static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6;
}

ChildProcess& ChildProcess::operator=(ChildProcess&& other) noexcept {
  if (this != &other) {
    if (pid_ > 0 && !status_) {
      ::kill(-pid_, SIGKILL);
      int st = 0;
      ::waitpid(pid_, &st, 0);
    }
    pid_ = other.pid_;
    status_ = other.status_;
    log_path_ = std::move(other.log_path_);
    cpu_seconds_ = other.cpu_seconds_;
    other.pid_ = -1;
  }
  return *this;
}

ChildProcess::~ChildProcess() {
  if (pid_ > 0 && !poll()) {
    ::kill(-pid_, SIGKILL);
    int st = 0;
    ::waitpid(pid_, &st, 0);
  }
}

std::optional<int> ChildProcess::poll() {
  if (status_ || pid_ <= 0) return status_;
  int st = 0;
  struct rusage usage {};
  if (::wait4(pid_, &st, WNOHANG, &usage) == pid_) reaped(st, usage);
  return status_;
}

bool ChildProcess::running() {
  return pid_ > 0 && !poll();
}

int ChildProcess::wait() {
  if (status_ || pid_ <= 0) return status_.value_or(-1);
  int st = 0;
  struct rusage usage {};
  while (::wait4(pid_, &st, 0, &usage) < 0 && errno == EINTR) {
  }
  reaped(st, usage);
  return *status_;
}

std::optional<int> ChildProcess::wait_for(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    if (auto s = poll()) return s;
    if (std::chrono::steady_clock::now() >= deadline) return std::nullopt;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

void ChildProcess::signal(int sig) {
  if (pid_ > 0 && !poll()) ::kill(-pid_, sig);
}

int ChildProcess::stop(std::chrono::milliseconds grace) {
  signal(SIGTERM);
  if (auto s = wait_for(grace)) return *s;
  signal(SIGKILL);
  return wait();
}

std::string tail_of_file(const std::string& path, int lines) {
  std::ifstream in(path);
  std::deque<std::string> last;
  std::string line;
  while (std::getline(in, line)) {
    last.push_back(line);
    if (static_cast<int>(last.size()) > lines) last.pop_front();
  }
  std::string out;
  for (const auto& l : last) out += "  | " + l + "\n";
  return out;
}

void run_child_or_throw(const std::vector<std::string>& argv, const std::string& log_path,
                        const std::string& what,
                        const std::function<void(const std::string&)>& progress,
                        std::chrono::milliseconds every) {
  ChildProcess c = ChildProcess::start(argv, log_path);
  std::optional<int> done;
  std::string reported;
  while (!(done = c.wait_for(progress ? every : std::chrono::hours(24 * 365)))) {
    std::ifstream in(log_path);
    std::string line, last;
    while (std::getline(in, line))
      if (!line.empty()) last = line;
    if (!last.empty() && last != reported) progress(last);
    reported = last;
  }
  const int code = *done;
  STOA_CHECK(code == 0, ErrorKind::kIo, what, " failed (exit code ", code, "); the end of ",
             log_path, ":\n", tail_of_file(log_path, 15));
}

}  // namespace stoa::cli
