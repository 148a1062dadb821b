// The stoa::Error a call throws, to look at its kind and words (fails the test when it throws
// none); message_of for the words alone.
#pragma once
#include <gtest/gtest.h>

#include <string>
#include <utility>

#include "core/error.h"

namespace stoa::test {

// `if_none`: the failure to report when the call throws nothing (what the test refuses).
template <typename F>
Error error_of(F&& f, const char* if_none = "no stoa::Error thrown") {
  try {
    f();
  } catch (const Error& e) {
    return e;
  }
  ADD_FAILURE() << if_none;
  return Error(ErrorKind::kInternal, "");
}

template <typename F>
std::string message_of(F&& f) {
  return error_of(std::forward<F>(f)).what();
}

}  // namespace stoa::test
