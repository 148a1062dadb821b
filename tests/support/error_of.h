// The stoa::Error a call throws, to look at its kind and words (fails the test when it throws
// none).
#pragma once
#include <gtest/gtest.h>

#include "core/error.h"

namespace stoa::test {

template <typename F>
Error error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e;
  }
  ADD_FAILURE() << "no stoa::Error thrown";
  return Error(ErrorKind::kInternal, "");
}

}  // namespace stoa::test
