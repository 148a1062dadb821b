// The built `stoa` binary as the CLI tests run it: where it is (ctest sets STOA_BINARY), one run
// with stdout and stderr kept in files (read back with read_text, support/file_text.h), or a
// command's stdout captured.
#pragma once
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "support/file_text.h"

namespace stoa::testing {

// STOA_BINARY, or `fallback` when ctest did not set it (the tests that skip without a binary
// pass "").
inline std::string stoa_binary(const char* fallback = "stoa") {
  const char* b = std::getenv("STOA_BINARY");
  return b ? b : fallback;
}

// Runs `stoa args` through the shell, stdout to dir/out.txt and stderr to dir/err.txt; the exit
// code, or -1 when a signal ended it.
inline int run_stoa(const std::filesystem::path& dir, const std::string& args) {
  const std::string cmd = stoa_binary() + " " + args + " > " + (dir / "out.txt").string() + " 2> " +
                          (dir / "err.txt").string();
  const int status = std::system(cmd.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// Runs the shell command `cmd` and returns what it wrote to stdout; `status` gets pclose's status
// (0: exited 0; -1: it could not be started).
inline std::string capture_output(const std::string& cmd, int* status) {
  std::string out;
  FILE* pipe = ::popen(cmd.c_str(), "r");
  if (pipe == nullptr) {
    *status = -1;
    return out;
  }
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, pipe)) > 0;) out.append(buf, n);
  *status = ::pclose(pipe);
  return out;
}

}  // namespace stoa::testing
