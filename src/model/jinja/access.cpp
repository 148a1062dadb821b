// Attribute access, indexing, slicing, `in`, the methods of strings and dicts, and the global
// functions.
#include <algorithm>

#include "core/error.h"
#include "model/jinja/builtins.h"
#include "model/jinja/call_args.h"
#include "model/jinja/strings.h"

namespace stoa::jinja {

namespace {

using K = Value::Kind;

Value make_callable(std::string name, std::function<Value(CallArgs&)> fn) {
  return Value(std::make_shared<Callable>(Callable{std::move(name), std::move(fn)}));
}

bool starts_or_ends(const std::string& s, const Value& affix, bool start,
                    const std::string& where) {
  // Python accepts a tuple (here: a list) of candidates.
  if (affix.kind() == K::kList) {
    for (const Value& a : affix.as_list())
      if (starts_or_ends(s, a, start, where)) return true;
    return false;
  }
  const std::string& a = string_argument(affix, where);
  if (a.size() > s.size()) return false;
  return start ? s.compare(0, a.size(), a) == 0 : s.compare(s.size() - a.size(), a.size(), a) == 0;
}

Value string_method(const std::string& s, const std::string& name) {
  std::string where = "str." + name + "()";
  if (name == "startswith" || name == "endswith") {
    return make_callable(where, [s, name, where](CallArgs& a) {
      check_arity(a, where, 1);
      STOA_CHECK(a.positional.size() == 1, ErrorKind::kInvalidArgument, where, " needs 1 argument");
      return Value(starts_or_ends(s, a.positional[0], name == "startswith", where));
    });
  }
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    return make_callable(where, [s, name, where](CallArgs& a) {
      check_arity(a, where, 1, {"chars"});
      return Value(strip(s, argument(a, 0, "chars"), name != "rstrip", name != "lstrip"));
    });
  }
  if (name == "split") {
    return make_callable(where, [s, where](CallArgs& a) {
      check_arity(a, where, 2, {"sep", "maxsplit"});
      return Value(split(s, argument(a, 0, "sep"),
                         int_argument(argument(a, 1, "maxsplit", Value(-1)), where)));
    });
  }
  if (name == "replace") {
    return make_callable(where, [s, where](CallArgs& a) {
      check_arity(a, where, 3, {"count"});
      return Value(replace(s, string_argument(argument(a, 0, "old"), where),
                           string_argument(argument(a, 1, "new"), where),
                           int_argument(argument(a, 2, "count", Value(-1)), where)));
    });
  }
  if (name == "upper" || name == "lower" || name == "title" || name == "capitalize") {
    return make_callable(where, [s, name, where](CallArgs& a) {
      check_arity(a, where, 0);
      return Value(change_case(s, name));
    });
  }
  if (name == "find") {
    return make_callable(where, [s, where](CallArgs& a) {
      check_arity(a, where, 1);
      size_t at = s.find(string_argument(argument(a, 0, "sub"), where));
      return Value(at == std::string::npos
                       ? int64_t{-1}
                       : static_cast<int64_t>(code_point_count(s.substr(0, at))));
    });
  }
  return Value();
}

Value dict_method(const Value& dict, const std::string& name) {
  std::string where = "dict." + name + "()";
  if (name == "items" || name == "keys" || name == "values") {
    return make_callable(where, [dict, name, where](CallArgs& a) {
      check_arity(a, where, 0);
      List out;
      for (const auto& [k, v] : dict.as_dict()) {
        if (name == "items")
          out.emplace_back(List{Value(k), v});
        else if (name == "keys")
          out.emplace_back(k);
        else
          out.push_back(v);
      }
      return Value(std::move(out));
    });
  }
  if (name == "get") {
    return make_callable(where, [dict, where](CallArgs& a) {
      check_arity(a, where, 2, {"default"});
      const Value* v = dict_find(dict.as_dict(), string_argument(argument(a, 0, "key"), where));
      return v ? *v : argument(a, 1, "default", Value::none());
    });
  }
  return Value();
}

// Python's index normalisation: -1 is the last item; out of range -> npos.
size_t position(int64_t index, size_t size) {
  int64_t i = index < 0 ? index + static_cast<int64_t>(size) : index;
  return i < 0 || i >= static_cast<int64_t>(size) ? std::string::npos : static_cast<size_t>(i);
}

}  // namespace

Value get_attribute(const Value& object, const std::string& name) {
  switch (object.kind()) {
    case K::kDict: {
      if (const Value* v = dict_find(object.as_dict(), name)) return *v;
      return dict_method(object, name);
    }
    case K::kNamespace: {
      const Value* v = dict_find(object.as_namespace().attributes, name);
      return v ? *v : Value();
    }
    case K::kString:
      return string_method(object.as_string(), name);
    case K::kUndefined:
      fail(ErrorKind::kInvalidArgument, "'", name, "' of an undefined value");
    case K::kNone:
      fail(ErrorKind::kInvalidArgument, "'", name, "' of none");
    default:
      return Value();
  }
}

Value get_index(const Value& object, const Value& index) {
  switch (object.kind()) {
    case K::kDict:
      if (index.is_string()) {
        const Value* v = dict_find(object.as_dict(), index.as_string());
        return v ? *v : Value();
      }
      return Value();
    case K::kNamespace:
      return index.is_string() ? get_attribute(object, index.as_string()) : Value();
    case K::kList: {
      if (index.kind() != K::kInt) return Value();
      size_t at = position(index.as_int(), object.as_list().size());
      return at == std::string::npos ? Value() : object.as_list()[at];
    }
    case K::kString: {
      if (index.kind() != K::kInt) return Value();
      std::vector<std::string> chars = split_code_points(object.as_string());
      size_t at = position(index.as_int(), chars.size());
      return at == std::string::npos ? Value() : Value(chars[at]);
    }
    case K::kUndefined:
      fail(ErrorKind::kInvalidArgument, "indexing an undefined value");
    case K::kNone:
      fail(ErrorKind::kInvalidArgument, "indexing none");
    default:
      fail(ErrorKind::kInvalidArgument, object.type_name(), " cannot be indexed");
  }
}

Value get_slice(const Value& object, const Value& start, const Value& stop, const Value& step) {
  auto bound = [](const Value& v, const char* what) -> std::optional<int64_t> {
    if (v.is_undefined() || v.is_none()) return std::nullopt;
    return int_argument(v, what);
  };
  std::optional<int64_t> step_v = bound(step, "slice step");
  int64_t st = step_v.value_or(1);
  STOA_CHECK(st != 0, ErrorKind::kInvalidArgument, "slice step cannot be zero");
  List items;
  bool is_string = object.is_string();
  if (is_string) {
    for (std::string& c : split_code_points(object.as_string())) items.emplace_back(std::move(c));
  } else {
    STOA_CHECK(object.kind() == K::kList, ErrorKind::kInvalidArgument, object.type_name(),
               " cannot be sliced");
    items = object.as_list();
  }
  const int64_t n = static_cast<int64_t>(items.size());
  // Python's slice.indices().
  auto clamp = [&](std::optional<int64_t> v, int64_t fallback) {
    if (!v) return fallback;
    int64_t i = *v < 0 ? *v + n : *v;
    return st > 0 ? std::clamp<int64_t>(i, 0, n) : std::clamp<int64_t>(i, -1, n - 1);
  };
  int64_t from = clamp(bound(start, "slice start"), st > 0 ? 0 : n - 1);
  int64_t to = clamp(bound(stop, "slice stop"), st > 0 ? n : -1);
  List out;
  for (int64_t i = from; st > 0 ? i < to : i > to; i += st)
    out.push_back(items[static_cast<size_t>(i)]);
  if (!is_string) return Value(std::move(out));
  std::string s;
  for (const Value& c : out) s += c.as_string();
  return Value(std::move(s));
}

bool contains(const Value& container, const Value& item) {
  switch (container.kind()) {
    case K::kString:
      STOA_CHECK(item.is_string(), ErrorKind::kInvalidArgument,
                 "'in <string>' needs a string, got ", item.type_name());
      return container.as_string().find(item.as_string()) != std::string::npos;
    case K::kList:
      return std::any_of(container.as_list().begin(), container.as_list().end(),
                         [&](const Value& v) { return values_equal(v, item); });
    case K::kDict:
      return item.is_string() && dict_find(container.as_dict(), item.as_string()) != nullptr;
    case K::kUndefined:
      return false;
    default:
      fail(ErrorKind::kInvalidArgument, "'in' needs a string, list or dict, got ",
           container.type_name());
  }
}

Value global_function(std::string_view name) {
  if (name == "range") {
    return make_callable("range", [](CallArgs& a) {
      check_arity(a, "range()", 3);
      STOA_CHECK(!a.positional.empty(), ErrorKind::kInvalidArgument, "range() needs an argument");
      int64_t start = 0, stop = 0, step = 1;
      if (a.positional.size() == 1) {
        stop = int_argument(a.positional[0], "range()");
      } else {
        start = int_argument(a.positional[0], "range()");
        stop = int_argument(a.positional[1], "range()");
        if (a.positional.size() == 3) step = int_argument(a.positional[2], "range()");
      }
      STOA_CHECK(step != 0, ErrorKind::kInvalidArgument, "range() step cannot be zero");
      // Its length first, so a huge range is refused before anything is built.
      __int128 span = step > 0 ? __int128{stop} - start : __int128{start} - stop;
      __int128 count =
          span <= 0 ? 0 : (span + (step > 0 ? step : -step) - 1) / (step > 0 ? step : -step);
      check_list_size(static_cast<size_t>(std::min<__int128>(count, kMaxListItems + 1)));
      List out;
      for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
        out.emplace_back(i);
        check_list_size(out.size());
      }
      return Value(std::move(out));
    });
  }
  if (name == "namespace" || name == "dict") {
    bool ns = name == "namespace";
    return make_callable(std::string(name), [ns](CallArgs& a) {
      STOA_CHECK(a.positional.empty(), ErrorKind::kInvalidArgument, ns ? "namespace()" : "dict()",
                 " takes only name=value arguments");
      Dict d;
      for (auto& [k, v] : a.keyword) dict_set(d, k, v);
      if (!ns) return Value(std::move(d));
      auto n = std::make_shared<Namespace>();
      n->attributes = std::move(d);
      return Value(std::move(n));
    });
  }
  if (name == "raise_exception") {
    return make_callable("raise_exception", [](CallArgs& a) -> Value {
      std::string message = a.positional.empty() ? "" : to_output(a.positional[0]);
      fail(ErrorKind::kInvalidArgument, "the template refused the messages: ", message);
    });
  }
  return Value();
}

}  // namespace stoa::jinja
