// The repository root of this build: where the committed assets (assets/) and the npm test
// peers (.deps/) live. CMake compiles with absolute paths, so it is this header's directory two
// levels up; STOA_SOURCE_DIR overrides it (a binary moved away from its checkout).
#pragma once
#include <cstdlib>
#include <filesystem>

namespace stoa {

inline std::filesystem::path source_root() {
  if (const char* env = std::getenv("STOA_SOURCE_DIR")) return env;
  return std::filesystem::path(__FILE__).parent_path().parent_path().parent_path();
}

}  // namespace stoa
