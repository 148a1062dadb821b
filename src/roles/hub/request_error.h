// The hub's refusals: an error with the HTTP status the server answers. Every part of the hub
// (identity, leasing, verification, the stores) throws it; the HTTP layer turns it into a reply.
#pragma once
#include <cstdint>
#include <string>

#include "core/error.h"

namespace stoa::hub {

// An error with the HTTP status the server answers (4xx: the client's fault). A 429 carries
// the milliseconds until the client may try again (the server's Retry-After header).
class RequestError : public Error {
 public:
  RequestError(int status, const std::string& message, int64_t retry_after_ms = 0)
      : Error(ErrorKind::kInvalidArgument, message),
        status_(status),
        retry_after_ms_(retry_after_ms) {}
  int status() const { return status_; }
  int64_t retry_after_ms() const { return retry_after_ms_; }

 private:
  int status_;
  int64_t retry_after_ms_;
};

}  // namespace stoa::hub
