#include "core/process.h"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#if defined(__linux__)
#include <sys/prctl.h>
#include <sys/syscall.h>
#elif defined(__APPLE__)
#include <mach-o/dyld.h>
#endif
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <thread>
#include <utility>

#include "core/error.h"

namespace stoa {
namespace fs = std::filesystem;
namespace {

// Without a pidfd the exit cannot be waited on together with the pipes: wait in slices.
constexpr int kPollSliceMs = 20;

bool is_executable_file(const std::string& path) {
  std::error_code ec;
  return fs::is_regular_file(path, ec) && ::access(path.c_str(), X_OK) == 0;
}

int open_pidfd(pid_t pid) {
#ifdef SYS_pidfd_open
  const long fd = ::syscall(SYS_pidfd_open, pid, 0);
  return fd >= 0 ? static_cast<int>(fd) : -1;
#else
  (void)pid;
  return -1;
#endif
}

// The write end a child's stream is connected to: -1 keeps the parent's stream. Pipes for
// captured streams are made here too (`capture_read` gets the parent's end).
int open_target(const OutputTarget& t, int* capture_read, const char* which) {
  switch (t.kind) {
    case OutputTarget::Kind::kInherit:
    case OutputTarget::Kind::kStdout:
      return -1;
    case OutputTarget::Kind::kDiscard: {
      const int fd = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
      STOA_CHECK(fd >= 0, ErrorKind::kIo, "cannot open /dev/null: ", std::strerror(errno));
      return fd;
    }
    case OutputTarget::Kind::kFile: {
      const int fd = ::open(
          t.path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC | (t.truncate ? O_TRUNC : O_APPEND), 0644);
      STOA_CHECK(fd >= 0, ErrorKind::kIo, "cannot open log ", t.path, ": ", std::strerror(errno));
      return fd;
    }
    case OutputTarget::Kind::kCapture: {
      int fds[2];
#if defined(__linux__)
      STOA_CHECK(::pipe2(fds, O_CLOEXEC) == 0, ErrorKind::kIo, "cannot make a pipe for ", which,
                 ": ", std::strerror(errno));
#else
      // No pipe2 on macOS: close-on-exec is set right after, so a child that another thread
      // forks in between could inherit these ends (the worker starts children from one thread).
      STOA_CHECK(::pipe(fds) == 0, ErrorKind::kIo, "cannot make a pipe for ", which, ": ",
                 std::strerror(errno));
      ::fcntl(fds[0], F_SETFD, FD_CLOEXEC);
      ::fcntl(fds[1], F_SETFD, FD_CLOEXEC);
#endif
      ::fcntl(fds[0], F_SETFL, ::fcntl(fds[0], F_GETFL) | O_NONBLOCK);
      *capture_read = fds[0];
      return fds[1];
    }
  }
  return -1;
}

void close_fd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

// Only async-signal-safe calls from here to exec (the parent may have threads).
[[noreturn]] void child_exit(const std::string& message, int code) {
  (void)!::write(STDERR_FILENO, message.data(), message.size());
  ::_exit(code);
}

}  // namespace

ProcessOptions logged_to(const std::string& log_path, bool truncate) {
  ProcessOptions o;
  o.out = OutputTarget::file(log_path, truncate);
  o.err = OutputTarget::same_as_stdout();
  return o;
}

Process Process::start(const std::vector<std::string>& argv, const ProcessOptions& options) {
  STOA_CHECK(!argv.empty() && !argv[0].empty(), ErrorKind::kInvalidArgument,
             "process: empty command");
  STOA_CHECK(options.out.kind != OutputTarget::Kind::kStdout, ErrorKind::kInvalidArgument,
             "process: stdout cannot go to stdout");
  std::string exe = argv[0];
  if (exe.find('/') == std::string::npos) {
    const std::string found = find_executable(exe);
    if (!found.empty()) exe = found;
  }
  Process p;
  p.own_group_ = options.own_process_group;
  if (options.out.kind == OutputTarget::Kind::kFile) p.log_path_ = options.out.path;
  // Everything the child needs is prepared before fork. Failures below close what was opened.
  int out_fd = -1, err_fd = -1, null_in = -1;
  int out_write = -1, err_write = -1;
  try {
    out_fd = open_target(options.out, &p.capture_fd_[0], "stdout");
    err_fd = open_target(options.err, &p.capture_fd_[1], "stderr");
    out_write = out_fd;
    err_write = err_fd;
    null_in = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    STOA_CHECK(null_in >= 0, ErrorKind::kIo, "cannot open /dev/null: ", std::strerror(errno));
  } catch (...) {
    close_fd(out_fd);
    close_fd(err_fd);
    p.close_fds();
    throw;
  }
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const bool err_to_out = options.err.kind == OutputTarget::Kind::kStdout;
  const std::string ns_path = options.netns.empty() ? "" : "/run/netns/" + options.netns;
  const std::string ns_failed = "cannot enter the network namespace " + options.netns + "\n";
  const std::string chdir_failed = "cannot change to the directory " + options.working_dir + "\n";
  const std::string exec_failed = "exec failed: cannot run " + exe + "\n";
  const pid_t parent = ::getpid();

  const pid_t pid = ::fork();
  if (pid == 0) {
    if (options.own_process_group) ::setpgid(0, 0);
    if (options.die_with_parent) {
#if defined(__linux__)
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
#endif
      // (macOS has no parent-death signal: there the child outlives a parent killed by SIGKILL.)
      if (::getppid() != parent) ::_exit(126);  // the parent died before prctl took effect
    }
    ::dup2(null_in, STDIN_FILENO);
    if (out_write >= 0) ::dup2(out_write, STDOUT_FILENO);
    if (err_to_out)
      ::dup2(STDOUT_FILENO, STDERR_FILENO);
    else if (err_write >= 0)
      ::dup2(err_write, STDERR_FILENO);
    if (!ns_path.empty()) {
#if defined(__linux__)
      const int ns = ::open(ns_path.c_str(), O_RDONLY | O_CLOEXEC);
      if (ns < 0 || ::setns(ns, CLONE_NEWNET) != 0) child_exit(ns_failed, 125);
#else
      child_exit(ns_failed, 125);  // network namespaces are Linux's (the fleet bench only)
#endif
    }
    if (!options.working_dir.empty() && ::chdir(options.working_dir.c_str()) != 0)
      child_exit(chdir_failed, 126);
    ::execv(exe.c_str(), args.data());
    child_exit(exec_failed, 127);
  }
  const int fork_errno = errno;
  close_fd(out_fd);  // the child holds its own copies
  close_fd(err_fd);
  close_fd(null_in);
  if (pid < 0) {
    p.close_fds();
    fail(ErrorKind::kIo, "cannot start ", argv[0], ": fork: ", std::strerror(fork_errno));
  }
  // Also from the parent, so a signal() right after start() already reaches the group.
  if (options.own_process_group) ::setpgid(pid, pid);
  p.pid_ = pid;
  p.pidfd_ = open_pidfd(pid);
  return p;
}

Process::Process(Process&& other) noexcept {
  *this = std::move(other);
}

Process& Process::operator=(Process&& other) noexcept {
  if (this == &other) return *this;
  kill_and_reap();
  pid_ = std::exchange(other.pid_, -1);
  pidfd_ = std::exchange(other.pidfd_, -1);
  own_group_ = other.own_group_;
  status_ = std::exchange(other.status_, std::nullopt);
  log_path_ = std::move(other.log_path_);
  cpu_seconds_ = std::exchange(other.cpu_seconds_, 0);
  peak_rss_bytes_ = std::exchange(other.peak_rss_bytes_, 0);
  for (int i = 0; i < 2; ++i) {
    capture_fd_[i] = std::exchange(other.capture_fd_[i], -1);
    captured_[i] = std::move(other.captured_[i]);
  }
  return *this;
}

Process::~Process() {
  kill_and_reap();
}

void Process::kill_and_reap() {
  if (pid_ > 0 && !try_reap()) {
    ::kill(own_group_ ? -pid_ : pid_, SIGKILL);
    int st = 0;
    struct rusage usage {};
    while (::wait4(pid_, &st, 0, &usage) < 0 && errno == EINTR) {
    }
    reaped(st, usage);
  }
  close_fds();
}

void Process::close_fds() {
  close_fd(pidfd_);
  close_fd(capture_fd_[0]);
  close_fd(capture_fd_[1]);
}

void Process::reaped(int status, const struct rusage& usage) {
  ExitStatus s;
  if (WIFEXITED(status)) {
    s.code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    s.signal = WTERMSIG(status);
    s.code = 128 + s.signal;
  }
  status_ = s;
  peak_rss_bytes_ = static_cast<int64_t>(usage.ru_maxrss) * 1024;  // Linux reports kB
  cpu_seconds_ = static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
                 static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6;
  // The child is gone: what it wrote is in the pipes (a grandchild still holding one open may
  // add more, which is not waited for).
  read_captures();
  close_fds();
}

bool Process::try_reap() {
  if (status_ || pid_ <= 0) return status_.has_value();
  int st = 0;
  struct rusage usage {};
  if (::wait4(pid_, &st, WNOHANG, &usage) == pid_) reaped(st, usage);
  return status_.has_value();
}

void Process::read_captures() {
  char buf[65536];
  for (int i = 0; i < 2; ++i) {
    while (capture_fd_[i] >= 0) {
      const ssize_t n = ::read(capture_fd_[i], buf, sizeof buf);
      if (n > 0) {
        captured_[i].append(buf, static_cast<size_t>(n));
      } else if (n == 0) {
        close_fd(capture_fd_[i]);  // every writer has closed it
      } else if (errno != EINTR) {
        break;  // EAGAIN: nothing more for now
      }
    }
  }
}

void Process::wait_events(int timeout_ms) {
  pollfd fds[3];
  nfds_t n = 0;
  if (pidfd_ >= 0) fds[n++] = {pidfd_, POLLIN, 0};
  for (int fd : capture_fd_)
    if (fd >= 0) fds[n++] = {fd, POLLIN, 0};
  int limit = timeout_ms;
  if (pidfd_ < 0) limit = timeout_ms < 0 ? kPollSliceMs : std::min(timeout_ms, kPollSliceMs);
  if (::poll(fds, n, limit) > 0) read_captures();
}

std::optional<int> Process::poll() {
  if (!status_ && pid_ > 0) {
    read_captures();
    try_reap();
  }
  if (!status_) return std::nullopt;
  return status_->code;
}

bool Process::running() {
  return pid_ > 0 && !poll();
}

int Process::wait() {
  if (pid_ <= 0) return status_ ? status_->code : -1;
  while (!try_reap()) {
    if (pidfd_ < 0 && capture_fd_[0] < 0 && capture_fd_[1] < 0) {
      // Nothing else to watch: block in wait4 itself.
      int st = 0;
      struct rusage usage {};
      while (::wait4(pid_, &st, 0, &usage) < 0 && errno == EINTR) {
      }
      reaped(st, usage);
      break;
    }
    wait_events(-1);
  }
  return status_->code;
}

std::optional<int> Process::wait_for(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    if (auto code = poll()) return code;
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return std::nullopt;
    // At least 1 ms: a sub-millisecond remainder must not turn into a busy loop.
    wait_events(static_cast<int>(std::clamp<int64_t>(left.count(), 1, 1 << 30)));
  }
}

void Process::signal(int sig) {
  if (pid_ > 0 && !poll()) ::kill(own_group_ ? -pid_ : pid_, sig);
}

int Process::stop(std::chrono::milliseconds grace) {
  signal(SIGTERM);
  if (auto code = wait_for(grace)) return *code;
  signal(SIGKILL);
  return wait();
}

std::string self_executable() {
#if defined(__APPLE__)
  uint32_t size = 0;
  _NSGetExecutablePath(nullptr, &size);
  std::string path(size, '\0');
  STOA_CHECK(_NSGetExecutablePath(path.data(), &size) == 0, ErrorKind::kIo,
             "cannot resolve the executable's path");
  path.resize(std::strlen(path.c_str()));
  return fs::weakly_canonical(path).string();
#endif
  std::error_code ec;
  auto p = fs::read_symlink("/proc/self/exe", ec);
  STOA_CHECK(!ec, ErrorKind::kIo, "cannot resolve /proc/self/exe: ", ec.message());
  return p.string();
}

std::string find_executable(const std::string& program) {
  if (program.empty()) return {};
  if (program.find('/') != std::string::npos)
    return is_executable_file(program) ? program : std::string();
  const char* path = std::getenv("PATH");
  const std::string dirs = path ? path : "/usr/local/bin:/usr/bin:/bin";
  size_t start = 0;
  while (start <= dirs.size()) {
    size_t end = dirs.find(':', start);
    if (end == std::string::npos) end = dirs.size();
    const std::string dir = end > start ? dirs.substr(start, end - start) : ".";
    const std::string candidate = (fs::path(dir) / program).string();
    if (is_executable_file(candidate)) return candidate;
    start = end + 1;
  }
  return {};
}

}  // namespace stoa
