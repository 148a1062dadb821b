#include "core/process_run.h"

#include <deque>
#include <fstream>

#include "core/error.h"

namespace stoa {

RunResult run_process(const std::vector<std::string>& argv, const ProcessOptions& options,
                      std::optional<std::chrono::milliseconds> deadline,
                      std::chrono::milliseconds grace) {
  Process p = Process::start(argv, options);
  RunResult r;
  if (deadline) {
    if (!p.wait_for(*deadline)) {
      r.timed_out = true;
      p.stop(grace);
    }
  } else {
    p.wait();
  }
  r.status = *p.exit_status();
  r.out = p.captured_out();
  r.err = p.captured_err();
  r.cpu_seconds = p.cpu_seconds();
  r.peak_rss_bytes = p.peak_rss_bytes();
  return r;
}

RunResult run_capture(const std::vector<std::string>& argv) {
  ProcessOptions o;
  o.out = OutputTarget::capture();
  o.err = OutputTarget::discard();
  return run_process(argv, o);
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
  Process c = Process::start(argv, logged_to(log_path));
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

}  // namespace stoa
