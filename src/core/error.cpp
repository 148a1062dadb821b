#include "core/error.h"

namespace stoa {

const char* error_kind_name(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::kInvalidArgument:
      return "invalid argument";
    case ErrorKind::kBadFormat:
      return "bad format";
    case ErrorKind::kNotFound:
      return "not found";
    case ErrorKind::kIo:
      return "i/o error";
    case ErrorKind::kIntegrity:
      return "integrity error";
    case ErrorKind::kUnsupported:
      return "unsupported";
    case ErrorKind::kNetwork:
      return "network error";
    case ErrorKind::kInternal:
      return "internal error";
  }
  return "error";
}

}  // namespace stoa
