#include "model/jinja/value.h"

#include <cmath>
#include <cstdio>

namespace stoa::jinja {

double Value::as_double() const {
  return kind() == Kind::kInt ? static_cast<double>(as_int()) : std::get<double>(v_);
}

bool Value::truthy() const {
  switch (kind()) {
    case Kind::kUndefined:
    case Kind::kNone:
      return false;
    case Kind::kBool:
      return as_bool();
    case Kind::kInt:
      return as_int() != 0;
    case Kind::kFloat:
      return as_double() != 0.0;
    case Kind::kString:
      return !as_string().empty();
    case Kind::kList:
      return !as_list().empty();
    case Kind::kDict:
      return !as_dict().empty();
    case Kind::kNamespace:
    case Kind::kCallable:
      return true;
  }
  return false;
}

const char* Value::type_name() const {
  static const char* kNames[] = {
      "an undefined value", "none",   "a boolean", "an integer",  "a float",
      "a string",           "a list", "a dict",    "a namespace", "a function"};
  return kNames[static_cast<int>(kind())];
}

const Value* dict_find(const Dict& dict, std::string_view key) {
  for (const auto& [k, v] : dict)
    if (k == key) return &v;
  return nullptr;
}

void dict_set(Dict& dict, std::string key, Value value) {
  for (auto& [k, v] : dict) {
    if (k == key) {
      v = std::move(value);
      return;
    }
  }
  dict.emplace_back(std::move(key), std::move(value));
}

bool values_equal(const Value& a, const Value& b) {
  using K = Value::Kind;
  if (a.is_number() && b.is_number()) {
    if (a.kind() == K::kInt && b.kind() == K::kInt) return a.as_int() == b.as_int();
    return a.as_double() == b.as_double();
  }
  // Python: True == 1; keep booleans apart from numbers here, as templates compare them only
  // with booleans (`x is false` is the idiom) and Jinja's `==` on mixed types is rare.
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case K::kUndefined:
    case K::kNone:
      return true;
    case K::kBool:
      return a.as_bool() == b.as_bool();
    case K::kString:
      return a.as_string() == b.as_string();
    case K::kList: {
      const List& x = a.as_list();
      const List& y = b.as_list();
      if (x.size() != y.size()) return false;
      for (size_t i = 0; i < x.size(); ++i)
        if (!values_equal(x[i], y[i])) return false;
      return true;
    }
    case K::kDict: {
      const Dict& x = a.as_dict();
      const Dict& y = b.as_dict();
      if (x.size() != y.size()) return false;
      for (const auto& [k, v] : x) {
        const Value* other = dict_find(y, k);
        if (!other || !values_equal(v, *other)) return false;
      }
      return true;
    }
    case K::kNamespace:
      return &a.as_namespace() == &b.as_namespace();
    case K::kCallable:
      return &a.as_callable() == &b.as_callable();
    default:
      return false;
  }
}

namespace {

std::string float_repr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  // Python's repr: the shortest spelling that reads back exactly, with ".0" on whole numbers.
  char buf[64];
  for (int precision = 1; precision <= 17; ++precision) {
    std::snprintf(buf, sizeof buf, "%.*g", precision, d);
    if (std::strtod(buf, nullptr) == d) break;
  }
  std::string s = buf;
  if (s.find_first_of(".en") == std::string::npos) s += ".0";
  return s;
}

}  // namespace

std::string python_repr(const Value& value) {
  using K = Value::Kind;
  switch (value.kind()) {
    case K::kString: {
      const std::string& s = value.as_string();
      char quote =
          s.find('\'') != std::string::npos && s.find('"') == std::string::npos ? '"' : '\'';
      std::string out(1, quote);
      for (char c : s) {
        if (c == quote || c == '\\') {
          out += '\\';
          out += c;
        } else if (c == '\n') {
          out += "\\n";
        } else if (c == '\t') {
          out += "\\t";
        } else if (c == '\r') {
          out += "\\r";
        } else {
          out += c;
        }
      }
      return out + quote;
    }
    case K::kList: {
      std::string out = "[";
      bool first = true;
      for (const Value& v : value.as_list()) {
        out += (first ? "" : ", ") + python_repr(v);
        first = false;
      }
      return out + "]";
    }
    case K::kDict: {
      std::string out = "{";
      bool first = true;
      for (const auto& [k, v] : value.as_dict()) {
        out += (first ? "" : ", ") + python_repr(Value(k)) + ": " + python_repr(v);
        first = false;
      }
      return out + "}";
    }
    default:
      return to_output(value);
  }
}

std::string to_output(const Value& value) {
  using K = Value::Kind;
  switch (value.kind()) {
    case K::kUndefined:
      return "";
    case K::kNone:
      return "None";
    case K::kBool:
      return value.as_bool() ? "True" : "False";
    case K::kInt:
      return std::to_string(value.as_int());
    case K::kFloat:
      return float_repr(value.as_double());
    case K::kString:
      return value.as_string();
    case K::kList:
    case K::kDict:
      return python_repr(value);
    case K::kNamespace:
      return "<Namespace>";
    case K::kCallable:
      return "<function " + value.as_callable().name + ">";
  }
  return "";
}

}  // namespace stoa::jinja
