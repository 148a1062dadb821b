#include "core/error.h"

#include "core/enum_names.h"

namespace stoa {

constexpr EnumName<ErrorKind> kErrorKindNames[] = {
    {ErrorKind::kInvalidArgument, "invalid argument"},
    {ErrorKind::kBadFormat, "bad format"},
    {ErrorKind::kNotFound, "not found"},
    {ErrorKind::kIo, "i/o error"},
    {ErrorKind::kIntegrity, "integrity error"},
    {ErrorKind::kUnsupported, "unsupported"},
    {ErrorKind::kNetwork, "network error"},
    {ErrorKind::kInternal, "internal error"}};

const char* error_kind_name(ErrorKind kind) {
  return enum_name(kErrorKindNames, kind, "error");
}

}  // namespace stoa
