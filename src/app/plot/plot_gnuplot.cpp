#include "app/plot/plot_gnuplot.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <vector>

#include "core/error.h"

namespace stoa::app::plot {
namespace fs = std::filesystem;

namespace {

bool is_executable_file(const std::string& path) {
  std::error_code ec;
  return fs::is_regular_file(path, ec) && ::access(path.c_str(), X_OK) == 0;
}

std::string last_lines(const std::string& path, size_t n) {
  std::ifstream in(path);
  std::deque<std::string> lines;
  for (std::string line; std::getline(in, line);) {
    lines.push_back(line);
    if (lines.size() > n) lines.pop_front();
  }
  std::string out;
  for (const auto& l : lines) out += "\n  " + l;
  return out;
}

}  // namespace

std::string find_executable(const std::string& program) {
  if (program.empty()) return {};
  if (program.find('/') != std::string::npos)
    return is_executable_file(program) ? program : std::string();
  const char* path = std::getenv("PATH");
  std::string dirs = path ? path : "/usr/local/bin:/usr/bin:/bin";
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

std::string run_gnuplot(const std::string& gnuplot, const std::string& script) {
  const std::string exe = find_executable(gnuplot);
  STOA_CHECK(
      !exe.empty(), ErrorKind::kNotFound, "plot: gnuplot not found (looked for '", gnuplot,
      gnuplot.find('/') == std::string::npos ? "' on PATH" : "'",
      "); install Debian's gnuplot-nox (apt-get install gnuplot-nox) or pass --gnuplot PATH");
  const fs::path script_path = fs::absolute(script);
  const std::string dir = script_path.parent_path().string();
  const std::string log = (script_path.parent_path() / "gnuplot.log").string();
  const std::string name = script_path.filename().string();

  // Everything the child needs is prepared before fork: after it only async-signal-safe calls.
  std::vector<char*> argv = {const_cast<char*>(exe.c_str()), const_cast<char*>(name.c_str()),
                             nullptr};
  const int log_fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  STOA_CHECK(log_fd >= 0, ErrorKind::kIo, "plot: cannot write ", log, ": ", std::strerror(errno));
  const pid_t pid = ::fork();
  if (pid == 0) {
    const int null_fd = ::open("/dev/null", O_RDONLY);
    if (null_fd < 0 || ::dup2(null_fd, 0) < 0 || ::dup2(log_fd, 1) < 0 || ::dup2(log_fd, 2) < 0 ||
        ::chdir(dir.c_str()) != 0)
      ::_exit(126);
    ::execv(exe.c_str(), argv.data());
    ::_exit(127);
  }
  const int fork_errno = errno;
  ::close(log_fd);
  STOA_CHECK(pid > 0, ErrorKind::kIo, "plot: cannot start ", exe, ": ", std::strerror(fork_errno));
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    STOA_CHECK(errno == EINTR, ErrorKind::kIo, "plot: waiting for gnuplot: ", std::strerror(errno));
  }
  if (WIFSIGNALED(status))
    fail(ErrorKind::kIo, "plot: ", exe, " ", script, " was killed by signal ", WTERMSIG(status),
         "; its log (", log, ") ends with:", last_lines(log, 10));
  const int code = WEXITSTATUS(status);
  if (code != 0) {
    const std::string tail = last_lines(log, 10);
    fail(ErrorKind::kIo, "plot: ", exe, " ", script, " exited with ", code,
         tail.empty()
             ? cat(" and wrote nothing to ", log, code >= 126 ? " (it could not be executed)" : "")
             : cat("; its log (", log, ") ends with:", tail));
  }
  return log;
}

}  // namespace stoa::app::plot
