#include "bench/scale_process.h"

#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>

#include "core/error.h"

namespace stoa::bench {

ProcessMemory read_process_memory(pid_t pid) {
  ProcessMemory m;
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) m.rss_bytes = std::stoull(line.substr(6)) * 1024;
    if (line.rfind("VmHWM:", 0) == 0) m.hwm_bytes = std::stoull(line.substr(6)) * 1024;
  }
  return m;
}

bool process_alive(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("State:", 0) == 0) return line.find('Z') == std::string::npos;
  }
  return false;
}

std::string self_binary() {
  std::vector<char> buffer(4096);
  const ssize_t n = ::readlink("/proc/self/exe", buffer.data(), buffer.size() - 1);
  STOA_CHECK(n > 0, ErrorKind::kIo, "cannot read /proc/self/exe: ", std::strerror(errno));
  return std::string(buffer.data(), static_cast<size_t>(n));
}

ChildProcess::ChildProcess(const std::vector<std::string>& argv, LineHandler on_line) {
  STOA_CHECK(!argv.empty(), ErrorKind::kInvalidArgument, "child process: empty command");
  int fds[2];
  STOA_CHECK(::pipe(fds) == 0, ErrorKind::kIo, "pipe: ", std::strerror(errno));
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  start_ = std::chrono::steady_clock::now();
  pid_ = ::fork();
  STOA_CHECK(pid_ >= 0, ErrorKind::kIo, "fork: ", std::strerror(errno));
  if (pid_ == 0) {
    ::dup2(fds[1], 1);
    ::dup2(fds[1], 2);
    ::close(fds[0]);
    ::close(fds[1]);
    ::execv(args[0], args.data());
    std::fprintf(stderr, "exec %s: %s\n", args[0], std::strerror(errno));
    ::_exit(127);
  }
  ::close(fds[1]);
  pipe_fd_ = fds[0];
  reader_ = std::thread([this, on_line = std::move(on_line)] {
    std::string pending;
    char buffer[4096];
    for (;;) {
      const ssize_t n = ::read(pipe_fd_, buffer, sizeof buffer);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      pending.append(buffer, static_cast<size_t>(n));
      for (size_t nl; (nl = pending.find('\n')) != std::string::npos;) {
        if (on_line) on_line(pending.substr(0, nl));
        pending.erase(0, nl + 1);
      }
    }
    if (!pending.empty() && on_line) on_line(pending);
  });
}

ChildProcess::~ChildProcess() {
  if (!reaped_ && pid_ > 0) {
    ::kill(pid_, SIGKILL);
    wait(std::chrono::seconds(30));
  }
  if (reader_.joinable()) reader_.join();
  if (pipe_fd_ >= 0) ::close(pipe_fd_);
}

void ChildProcess::signal(int sig) {
  if (!reaped_ && pid_ > 0) ::kill(pid_, sig);
}

ChildResult ChildProcess::wait(std::chrono::seconds timeout) {
  if (reaped_) return result_;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  int status = 0;
  rusage usage{};
  for (;;) {
    const pid_t r = ::wait4(pid_, &status, WNOHANG, &usage);
    if (r == pid_) break;
    if (r < 0 && errno != EINTR) break;
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(pid_, SIGKILL);
      ::wait4(pid_, &status, 0, &usage);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  reaped_ = true;
  result_.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  result_.max_rss_bytes = static_cast<uint64_t>(usage.ru_maxrss) * 1024;
  result_.exit_status = WIFEXITED(status)     ? WEXITSTATUS(status)
                        : WIFSIGNALED(status) ? 128 + WTERMSIG(status)
                                              : -1;
  if (reader_.joinable()) reader_.join();
  return result_;
}

ChildResult run_child(const std::vector<std::string>& argv, std::string* log,
                      std::chrono::seconds timeout) {
  std::mutex mutex;
  ChildProcess child(argv, [&](const std::string& line) {
    std::lock_guard lock(mutex);
    if (log && log->size() < (1u << 20)) *log += line + "\n";
  });
  return child.wait(timeout);
}

RssSampler::RssSampler(pid_t pid, std::chrono::milliseconds interval) : pid_(pid) {
  thread_ = std::thread([this, interval] {
    while (!stop_) {
      take_peak_sample();
      std::this_thread::sleep_for(interval);
    }
  });
}

RssSampler::~RssSampler() {
  stop_ = true;
  thread_.join();
}

void RssSampler::take_peak_sample() {
  const uint64_t rss = read_process_memory(pid_).rss_bytes;
  std::lock_guard lock(mutex_);
  peak_ = std::max(peak_, rss);
}

uint64_t RssSampler::take_peak() {
  take_peak_sample();
  std::lock_guard lock(mutex_);
  const uint64_t peak = peak_;
  peak_ = 0;
  return peak;
}

}  // namespace stoa::bench
