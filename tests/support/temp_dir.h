// A scratch directory removed at the end of the test, and a fixture that gives each test case
// one: a test never sees another case's (or another run's) files.
#pragma once
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <stdexcept>
#include <string>

#include "core/error.h"

namespace stoa::testing {

class TempDir {
 public:
  explicit TempDir(const std::string& tag) {
    std::string base = cat(std::filesystem::temp_directory_path().string(), "/stoa-", tag, "-",
                           getpid(), "-XXXXXX");
    path_ = mkdtemp(base.data()) ? base : throw std::runtime_error("mkdtemp failed");
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// A test whose cases each get a fresh, empty directory `dir`, removed afterwards.
class TempDirTest : public ::testing::Test {
 private:
  TempDir scratch_{"test"};  // declared first: `dir` is made from it

 protected:
  const std::filesystem::path dir{scratch_.path()};
};

}  // namespace stoa::testing
