// Reading a builtin's arguments the way Python binds them: by position or by name.
#pragma once
#include <string>
#include <string_view>

#include "core/error.h"
#include "model/jinja/value.h"

namespace stoa::jinja {

// The argument at `position` or named `name`; `fallback` when neither was given.
inline Value argument(const CallArgs& args, size_t position, std::string_view name,
                      Value fallback = Value()) {
  if (position < args.positional.size()) return args.positional[position];
  for (const auto& [k, v] : args.keyword)
    if (k == name) return v;
  return fallback;
}

// Refuses more positional arguments than `most` and keywords not in `known`.
inline void check_arity(const CallArgs& args, std::string_view function, size_t most,
                        std::initializer_list<std::string_view> known = {}) {
  STOA_CHECK(args.positional.size() <= most, ErrorKind::kInvalidArgument, function,
             " takes at most ", most, " positional argument(s), got ", args.positional.size());
  for (const auto& [k, v] : args.keyword) {
    bool ok = false;
    for (std::string_view n : known) ok = ok || n == k;
    STOA_CHECK(ok, ErrorKind::kInvalidArgument, function, " has no argument named '", k, "'");
  }
}

inline const std::string& string_argument(const Value& v, std::string_view function) {
  STOA_CHECK(v.is_string(), ErrorKind::kInvalidArgument, function, " expects a string, got ",
             v.type_name());
  return v.as_string();
}

inline int64_t int_argument(const Value& v, std::string_view function) {
  STOA_CHECK(v.kind() == Value::Kind::kInt, ErrorKind::kInvalidArgument, function,
             " expects an integer, got ", v.type_name());
  return v.as_int();
}

}  // namespace stoa::jinja
