#include "bench/scale_process.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <fstream>
#include <optional>

#include "core/process_run.h"

namespace stoa::bench {

bool process_alive(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("State:", 0) == 0) return line.find('Z') == std::string::npos;
  }
  return false;
}

ChildProcess::ChildProcess(const std::vector<std::string>& argv, const std::string& log_path,
                           LineHandler on_line) {
  ProcessOptions options;
  options.out = OutputTarget::file(log_path, /*truncate=*/true);
  options.err = OutputTarget::same_as_stdout();
  options.die_with_parent = true;
  start_ = std::chrono::steady_clock::now();
  process_ = Process::start(argv, options);  // the log file exists once this returns
  pid_ = process_.pid();
  follower_ =
      std::thread([this, log_path, on_line = std::move(on_line)] { follow(log_path, on_line); });
}

// Reads what the child has written so far, line by line; at the end of the file it waits a
// little and reads again, until the child has been reaped (then once more: the last lines).
void ChildProcess::follow(const std::string& log_path, LineHandler on_line) {
  const int fd = ::open(log_path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  std::string pending;
  char buffer[4096];
  for (;;) {
    const bool last_pass = reaped_.load();
    for (;;) {
      const ssize_t n = ::read(fd, buffer, sizeof buffer);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      pending.append(buffer, static_cast<size_t>(n));
      for (size_t nl; (nl = pending.find('\n')) != std::string::npos;) {
        if (on_line) on_line(pending.substr(0, nl));
        pending.erase(0, nl + 1);
      }
    }
    if (last_pass) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (!pending.empty() && on_line) on_line(pending);
  ::close(fd);
}

ChildProcess::~ChildProcess() {
  if (!reaped_) wait(std::chrono::seconds(0));
}

void ChildProcess::signal(int sig) {
  if (!reaped_) process_.signal(sig);
}

ChildResult ChildProcess::wait(std::chrono::seconds timeout) {
  if (reaped_) return result_;
  std::optional<int> code = process_.wait_for(timeout);
  if (!code) {
    process_.signal(SIGKILL);
    code = process_.wait();
  }
  result_.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  result_.max_rss_bytes = static_cast<uint64_t>(process_.peak_rss_bytes());
  result_.cpu_seconds = process_.cpu_seconds();
  result_.exit_status = *code;
  reaped_ = true;
  if (follower_.joinable()) follower_.join();
  return result_;
}

ChildResult run_child(const std::vector<std::string>& argv, std::string* log,
                      std::chrono::seconds timeout) {
  ProcessOptions options;
  options.out = OutputTarget::capture();
  options.err = OutputTarget::same_as_stdout();
  options.die_with_parent = true;
  const auto start = std::chrono::steady_clock::now();
  const RunResult run = run_process(argv, options, timeout, std::chrono::milliseconds(0));
  ChildResult result;
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  result.max_rss_bytes = static_cast<uint64_t>(run.peak_rss_bytes);
  result.exit_status = run.status.code;
  if (log) *log += run.out.substr(0, size_t{1} << 20);
  return result;
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
