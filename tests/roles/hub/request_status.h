// The HTTP status a hub call refuses with (the RequestError it throws), for tests that check
// which calls are refused and how.
#pragma once
#include <functional>

#include "roles/hub/request_error.h"

namespace stoa::hub {

// `call`'s RequestError status, or `none` when it returns.
inline int request_status(const std::function<void()>& call, int none = 0) {
  try {
    call();
  } catch (const RequestError& e) {
    return e.status();
  }
  return none;
}

}  // namespace stoa::hub
