// The built `stoa` binary as the CLI tests run it: where it is (ctest sets STOA_BINARY), one run
// with stdout and stderr kept in files, and reading those files back.
#pragma once
#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace stoa::testing {

// STOA_BINARY, or `fallback` when ctest did not set it (the tests that skip without a binary
// pass "").
inline std::string stoa_binary(const char* fallback = "stoa") {
  const char* b = std::getenv("STOA_BINARY");
  return b ? b : fallback;
}

inline std::string read_text(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// Runs `stoa args` through the shell, stdout to dir/out.txt and stderr to dir/err.txt; the exit
// code, or -1 when a signal ended it.
inline int run_stoa(const std::filesystem::path& dir, const std::string& args) {
  const std::string cmd = stoa_binary() + " " + args + " > " + (dir / "out.txt").string() + " 2> " +
                          (dir / "err.txt").string();
  const int status = std::system(cmd.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

}  // namespace stoa::testing
