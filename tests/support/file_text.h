// A whole file as a string, for the tests that compare what a run wrote or read a fixture: one
// helper instead of a copy in every test file.
#pragma once
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>

namespace stoa::testing {

// The file's bytes, or "" when it cannot be opened: a failure message may name a log that the
// run never wrote, and should still print.
inline std::string read_text(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// The same for a file the test cannot do without (a fixture): one that cannot be opened throws,
// naming it, rather than comparing against "".
inline std::string read_text_or_throw(const std::filesystem::path& path) {
  if (!std::ifstream(path, std::ios::binary)) {
    throw std::runtime_error("cannot read " + path.string());
  }
  return read_text(path);
}

}  // namespace stoa::testing
