// The source tree a test reads files from (docs, envs/, fixtures): STOA_SOURCE_DIR, which CTest sets
// for every test (tests/CMakeLists.txt); run by hand, the tree this header is in.
#pragma once
#include <cstdlib>
#include <filesystem>

namespace stoa::test {

inline std::filesystem::path source_dir() {
  if (const char* dir = std::getenv("STOA_SOURCE_DIR")) return dir;
  return std::filesystem::path(__FILE__).parent_path().parent_path().parent_path();
}

}  // namespace stoa::test
