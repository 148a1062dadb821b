// Python's str methods on UTF-8 strings, by code point (templates index and strip characters,
// not bytes). Strings reaching a template are valid UTF-8 (ChatTemplate checks its inputs).
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "model/jinja/value.h"

namespace stoa::jinja {

size_t code_point_count(std::string_view s);
std::vector<std::string> split_code_points(std::string_view s);

// str.strip/lstrip/rstrip(chars): chars undefined or none strips whitespace.
std::string strip(std::string_view s, const Value& chars, bool left, bool right);
// "upper", "lower", "title" or "capitalize" (ASCII letters; others are kept as they are).
std::string change_case(std::string_view s, std::string_view how);
// str.replace(old, new, count); count < 0 replaces all.
std::string replace(std::string_view s, std::string_view old, std::string_view with, int64_t count);
// str.split(sep, maxsplit): sep undefined or none splits on runs of whitespace.
List split(std::string_view s, const Value& sep, int64_t maxsplit);

}  // namespace stoa::jinja
