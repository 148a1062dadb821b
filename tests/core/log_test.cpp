// core/log: a line goes to stderr and, once a file is named, to the file too (appended, its
// directory made); a second file replaces the first.
#include "core/log.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

namespace stoa {
namespace {

std::string read_all(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(Log, LinesAlsoGoToTheNamedFile) {
  const auto dir =
      std::filesystem::temp_directory_path() / ("stoa_log_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  const auto first = dir / "nested" / "run.log";
  log_also_to_file(first.string());
  log_info("test", "one ", 1);
  log_also_to_file(first.string());  // appended, as a restart does
  log_warn("test", "two");
  const auto second = dir / "other.log";
  log_also_to_file(second.string());
  log_error("test", "three");
  const std::string a = read_all(first), b = read_all(second);
  EXPECT_NE(a.find(" I [test] one 1\n"), std::string::npos) << a;
  EXPECT_NE(a.find(" W [test] two\n"), std::string::npos) << a;
  EXPECT_EQ(a.find("three"), std::string::npos) << a;
  EXPECT_NE(b.find(" E [test] three\n"), std::string::npos) << b;
  EXPECT_THROW(log_also_to_file((dir / "other.log" / "x.log").string()), Error);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace stoa
