#include "app/plot/plot_gnuplot.h"

#include <deque>
#include <filesystem>
#include <fstream>
#include <vector>

#include "core/error.h"
#include "core/process.h"
#include "core/process_run.h"

namespace stoa::app::plot {
namespace fs = std::filesystem;

namespace {

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

  ProcessOptions options = logged_to(log, /*truncate=*/true);
  options.working_dir = dir;
  options.own_process_group = false;  // a Ctrl-C at the terminal stops gnuplot with `stoa plot`
  ExitStatus status;
  try {
    status = run_process({exe, name}, options).status;
  } catch (const Error& e) {
    fail(ErrorKind::kIo, "plot: ", e.what());
  }
  if (status.signaled())
    fail(ErrorKind::kIo, "plot: ", exe, " ", script, " was killed by signal ", status.signal,
         "; its log (", log, ") ends with:", last_lines(log, 10));
  const int code = status.code;
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
