// Filters (x | name(args)) and tests (x is name(args)), and tojson.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>

#include "core/error.h"
#include "model/jinja/builtins.h"
#include "model/jinja/call_args.h"
#include "model/jinja/strings.h"
#include "model/unicode.h"

namespace stoa::jinja {

namespace {

using K = Value::Kind;

constexpr std::array<std::string_view, 20> kFilters = {
    "trim",  "length",  "count", "tojson",     "default", "d",     "string",
    "upper", "lower",   "title", "capitalize", "join",    "first", "last",
    "list",  "reverse", "items", "replace",    "int",     "safe"};
constexpr std::array<std::string_view, 16> kTests = {
    "defined", "undefined", "none",    "string",   "number",   "integer",  "float",   "boolean",
    "true",    "false",     "mapping", "iterable", "sequence", "callable", "equalto", "eq"};

void json_string(std::string& out, const std::string& s) {
  out += '"';
  for (char c : s) {
    unsigned char u = static_cast<unsigned char>(c);
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (u < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", u);
          out += buf;
        } else {
          out += c;
        }
    }
  }
  out += '"';
}

void json_value(std::string& out, const Value& v, int indent, int depth) {
  STOA_CHECK(depth < 64, ErrorKind::kInvalidArgument, "tojson: nested deeper than 64 levels");
  std::string pad =
      indent > 0 ? "\n" + std::string(static_cast<size_t>(indent * (depth + 1)), ' ') : "";
  std::string close_pad =
      indent > 0 ? "\n" + std::string(static_cast<size_t>(indent * depth), ' ') : "";
  const char* item_sep = indent > 0 ? "," : ", ";
  switch (v.kind()) {
    case K::kUndefined:
    case K::kNone:
      out += "null";
      return;
    case K::kBool:
      out += v.as_bool() ? "true" : "false";
      return;
    case K::kInt:
    case K::kFloat: {
      STOA_CHECK(v.kind() == K::kInt || std::isfinite(v.as_double()), ErrorKind::kInvalidArgument,
                 "tojson: ", to_output(v), " is not a JSON number");
      out += to_output(v);
      return;
    }
    case K::kString:
      json_string(out, v.as_string());
      return;
    case K::kList: {
      const List& list = v.as_list();
      out += '[';
      for (size_t i = 0; i < list.size(); ++i) {
        out += i ? item_sep : "";
        out += pad;
        json_value(out, list[i], indent, depth + 1);
      }
      if (!list.empty()) out += close_pad;
      out += ']';
      break;
    }
    case K::kDict:
    case K::kNamespace: {
      const Dict& dict = v.kind() == K::kDict ? v.as_dict() : v.as_namespace().attributes;
      out += '{';
      for (size_t i = 0; i < dict.size(); ++i) {
        out += i ? item_sep : "";
        out += pad;
        json_string(out, dict[i].first);
        out += ": ";
        json_value(out, dict[i].second, indent, depth + 1);
      }
      if (!dict.empty()) out += close_pad;
      out += '}';
      break;
    }
    case K::kCallable:
      fail(ErrorKind::kInvalidArgument, "tojson: a function is not JSON");
  }
  check_string_size(out.size());
}

int64_t length_of(const Value& v, const char* what) {
  switch (v.kind()) {
    case K::kString:
      return static_cast<int64_t>(code_point_count(v.as_string()));
    case K::kList:
      return static_cast<int64_t>(v.as_list().size());
    case K::kDict:
      return static_cast<int64_t>(v.as_dict().size());
    case K::kUndefined:
      return 0;
    default:
      fail(ErrorKind::kInvalidArgument, what, ": ", v.type_name(), " has no length");
  }
}

List as_items(const Value& v, const char* what) {
  switch (v.kind()) {
    case K::kList:
      return v.as_list();
    case K::kString: {
      List out;
      for (std::string& c : split_code_points(v.as_string())) out.emplace_back(std::move(c));
      return out;
    }
    case K::kDict: {
      List out;
      for (const auto& [k, val] : v.as_dict()) out.emplace_back(k);
      return out;
    }
    default:
      fail(ErrorKind::kInvalidArgument, what, ": ", v.type_name(), " is not iterable");
  }
}

}  // namespace

void check_string_size(size_t bytes) {
  STOA_CHECK(bytes <= kMaxStringBytes, ErrorKind::kInvalidArgument, "a string of ", bytes,
             " bytes exceeds the template limit of ", kMaxStringBytes);
}

void check_list_size(size_t items) {
  STOA_CHECK(items <= kMaxListItems, ErrorKind::kInvalidArgument, "a list of ", items,
             " items exceeds the template limit of ", kMaxListItems);
}

std::string to_json(const Value& value, int indent) {
  std::string out;
  json_value(out, value, indent, 0);
  return out;
}

bool is_filter(std::string_view name) {
  return std::find(kFilters.begin(), kFilters.end(), name) != kFilters.end();
}

bool is_test(std::string_view name) {
  return std::find(kTests.begin(), kTests.end(), name) != kTests.end();
}

Value apply_filter(const std::string& name, const Value& v, CallArgs& args) {
  std::string where = "filter '" + name + "'";
  if (name == "trim") {
    check_arity(args, where, 1, {"chars"});
    Value chars = argument(args, 0, "chars");
    return Value(strip(string_argument(v, where), chars, true, true));
  }
  if (name == "length" || name == "count") {
    check_arity(args, where, 0);
    return Value(length_of(v, where.c_str()));
  }
  if (name == "tojson") {
    check_arity(args, where, 1, {"indent"});
    Value indent = argument(args, 0, "indent", Value::none());
    return Value(to_json(v, indent.is_none() ? 0
                                             : static_cast<int>(std::clamp<int64_t>(
                                                   int_argument(indent, where), 0, 16))));
  }
  if (name == "default" || name == "d") {
    check_arity(args, where, 2, {"default_value", "boolean"});
    Value fallback = argument(args, 0, "default_value", Value(""));
    bool boolean = argument(args, 1, "boolean", Value(false)).truthy();
    return (boolean ? !v.truthy() : v.is_undefined()) ? fallback : v;
  }
  if (name == "string" || name == "safe") {
    check_arity(args, where, 0);
    return Value(to_output(v));
  }
  if (name == "upper" || name == "lower" || name == "title" || name == "capitalize") {
    check_arity(args, where, 0);
    return Value(change_case(string_argument(v, where), name));
  }
  if (name == "join") {
    check_arity(args, where, 1, {"d"});
    const std::string sep = string_argument(argument(args, 0, "d", Value("")), where);
    std::string out;
    bool first = true;
    for (const Value& item : as_items(v, where.c_str())) {
      out += (first ? "" : sep) + to_output(item);
      first = false;
      check_string_size(out.size());
    }
    return Value(std::move(out));
  }
  if (name == "first" || name == "last") {
    check_arity(args, where, 0);
    List items = as_items(v, where.c_str());
    if (items.empty()) return Value();
    return name == "first" ? items.front() : items.back();
  }
  if (name == "list") {
    check_arity(args, where, 0);
    return Value(as_items(v, where.c_str()));
  }
  if (name == "reverse") {
    check_arity(args, where, 0);
    if (v.is_string()) {
      List chars = as_items(v, where.c_str());
      std::string out;
      for (auto it = chars.rbegin(); it != chars.rend(); ++it) out += it->as_string();
      return Value(std::move(out));
    }
    List items = as_items(v, where.c_str());
    std::reverse(items.begin(), items.end());
    return Value(std::move(items));
  }
  if (name == "items") {
    check_arity(args, where, 0);
    STOA_CHECK(v.kind() == K::kDict, ErrorKind::kInvalidArgument, where, ": expects a dict, got ",
               v.type_name());
    List out;
    for (const auto& [k, val] : v.as_dict()) out.emplace_back(List{Value(k), val});
    return Value(std::move(out));
  }
  if (name == "replace") {
    check_arity(args, where, 3, {"old", "new", "count"});
    return Value(replace(string_argument(v, where),
                         string_argument(argument(args, 0, "old"), where),
                         string_argument(argument(args, 1, "new"), where),
                         int_argument(argument(args, 2, "count", Value(-1)), where)));
  }
  if (name == "int") {
    check_arity(args, where, 1, {"default"});
    if (v.kind() == K::kInt) return v;
    if (v.kind() == K::kFloat && std::isfinite(v.as_double()) && std::fabs(v.as_double()) < 9e18)
      return Value(static_cast<int64_t>(v.as_double()));
    if (v.kind() == K::kBool) return Value(static_cast<int64_t>(v.as_bool()));
    if (v.is_string()) {
      try {
        size_t used = 0;
        int64_t parsed = std::stoll(v.as_string(), &used);
        if (used == v.as_string().size()) return Value(parsed);
      } catch (const std::exception&) {
      }
    }
    return argument(args, 0, "default", Value(0));
  }
  fail(ErrorKind::kInvalidArgument, "unknown filter '", name, "'");
}

bool apply_test(const std::string& name, const Value& v, CallArgs& args) {
  std::string where = "test '" + name + "'";
  if (name == "equalto" || name == "eq") {
    check_arity(args, where, 1);
    STOA_CHECK(args.positional.size() == 1, ErrorKind::kInvalidArgument, where,
               " needs the value to compare with");
    return values_equal(v, args.positional[0]);
  }
  check_arity(args, where, 0);
  if (name == "defined") return !v.is_undefined();
  if (name == "undefined") return v.is_undefined();
  if (name == "none") return v.is_none();
  if (name == "string") return v.is_string();
  if (name == "number") return v.is_number();
  if (name == "integer") return v.kind() == K::kInt;
  if (name == "float") return v.kind() == K::kFloat;
  if (name == "boolean") return v.kind() == K::kBool;
  if (name == "true") return v.kind() == K::kBool && v.as_bool();
  if (name == "false") return v.kind() == K::kBool && !v.as_bool();
  if (name == "mapping") return v.kind() == K::kDict || v.kind() == K::kNamespace;
  if (name == "iterable") return v.is_string() || v.kind() == K::kList || v.kind() == K::kDict;
  if (name == "sequence") return v.is_string() || v.kind() == K::kList || v.kind() == K::kDict;
  if (name == "callable") return v.kind() == K::kCallable;
  fail(ErrorKind::kInvalidArgument, "unknown test '", name, "'");
}

}  // namespace stoa::jinja
