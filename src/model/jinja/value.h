// The values a chat template computes with: Jinja2's (Python's) data model cut to what chat
// templates use. Lists, dicts and namespaces are shared by reference, as in Python, so that
// `{% set ns.x = ... %}` inside a loop is seen after it.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace stoa::jinja {

class Value;
using List = std::vector<Value>;
// Insertion-ordered, string keys only (JSON objects and template literals): tojson and
// dict.items() keep the order the messages were written in.
using Dict = std::vector<std::pair<std::string, Value>>;

// Arguments of a call: positional, then keyword (name=value).
struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
};

// A built-in function, a bound string/list/dict method, or a macro.
struct Callable {
  std::string name;
  std::function<Value(CallArgs&)> call;
};

struct Namespace {
  Dict attributes;
};

class Value {
 public:
  enum class Kind {
    kUndefined,
    kNone,
    kBool,
    kInt,
    kFloat,
    kString,
    kList,
    kDict,
    kNamespace,
    kCallable
  };

  Value() = default;  // undefined
  static Value none() { return Value(Storage(std::nullptr_t{})); }
  Value(bool b) : v_(b) {}
  Value(int64_t i) : v_(i) {}
  Value(int i) : v_(static_cast<int64_t>(i)) {}
  Value(double d) : v_(d) {}
  Value(std::string s) : v_(std::move(s)) {}
  Value(const char* s) : v_(std::string(s)) {}
  Value(List l) : v_(std::make_shared<List>(std::move(l))) {}
  Value(Dict d) : v_(std::make_shared<Dict>(std::move(d))) {}
  Value(std::shared_ptr<Namespace> ns) : v_(std::move(ns)) {}
  Value(std::shared_ptr<Callable> c) : v_(std::move(c)) {}

  Kind kind() const { return static_cast<Kind>(v_.index()); }
  bool is_undefined() const { return kind() == Kind::kUndefined; }
  bool is_none() const { return kind() == Kind::kNone; }
  bool is_string() const { return kind() == Kind::kString; }
  bool is_number() const { return kind() == Kind::kInt || kind() == Kind::kFloat; }

  bool as_bool() const { return std::get<bool>(v_); }
  int64_t as_int() const { return std::get<int64_t>(v_); }
  double as_double() const;  // int or float
  const std::string& as_string() const { return std::get<std::string>(v_); }
  List& as_list() const { return *std::get<std::shared_ptr<List>>(v_); }
  Dict& as_dict() const { return *std::get<std::shared_ptr<Dict>>(v_); }
  Namespace& as_namespace() const { return *std::get<std::shared_ptr<Namespace>>(v_); }
  const Callable& as_callable() const { return *std::get<std::shared_ptr<Callable>>(v_); }

  // Python truthiness: undefined, none, false, 0, "", [] and {} are false.
  bool truthy() const;
  // "a string", "an integer", ... for error messages.
  const char* type_name() const;

 private:
  using Storage = std::variant<std::monostate, std::nullptr_t, bool, int64_t, double, std::string,
                               std::shared_ptr<List>, std::shared_ptr<Dict>,
                               std::shared_ptr<Namespace>, std::shared_ptr<Callable>>;
  explicit Value(Storage s) : v_(std::move(s)) {}
  Storage v_;
};

// Looks a key up in a dict; nullptr when absent.
const Value* dict_find(const Dict& dict, std::string_view key);
// Sets or replaces a key, keeping the first insertion's position.
void dict_set(Dict& dict, std::string key, Value value);

// Python's == for these types (1 == 1.0, lists and dicts element-wise).
bool values_equal(const Value& a, const Value& b);

// What {{ value }} prints, as Jinja2 does: str() of the value ("None", "True", a float's repr,
// a list as "['a', 1]"); undefined prints nothing.
std::string to_output(const Value& value);

// Python's repr() of a string ('it''s' -> "it's" quoted as Python would).
std::string python_repr(const Value& value);

}  // namespace stoa::jinja
