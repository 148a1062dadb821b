// The repository root of this build: where the committed assets (assets/) and the npm test
// peers (.deps/) live. CMake passes the checkout's absolute path as STOA_SOURCE_ROOT to the
// libraries that include this header (__FILE__ is not reliable: a compiler cache with a base
// directory, or a build from relative paths, rewrites it); STOA_SOURCE_DIR overrides it at run
// time (a binary moved away from its checkout).
#pragma once
#include <cstdlib>
#include <filesystem>

#ifndef STOA_SOURCE_ROOT
#error "STOA_SOURCE_ROOT is not defined: add it to the target's compile definitions (CMake)"
#endif

namespace stoa {

inline std::filesystem::path source_root() {
  if (const char* env = std::getenv("STOA_SOURCE_DIR")) return env;
  return STOA_SOURCE_ROOT;
}

}  // namespace stoa
