#include "model/jinja/evaluator.h"

#include <cmath>

#include "core/error.h"
#include "model/jinja/builtins.h"
#include "model/jinja/template.h"

namespace stoa::jinja {

namespace {

using K = Value::Kind;

// Items a for loop walks: a list's items, a dict's keys, a string's characters.
List iteration_items(const Value& v) {
  switch (v.kind()) {
    case K::kUndefined:
      return {};  // Jinja: an undefined iterable is empty
    case K::kList:
      return v.as_list();
    case K::kDict: {
      List keys;
      for (const auto& [k, val] : v.as_dict()) keys.emplace_back(k);
      return keys;
    }
    case K::kString: {
      CallArgs none;
      return apply_filter("list", v, none).as_list();
    }
    default:
      fail(ErrorKind::kInvalidArgument, "cannot loop over ", v.type_name());
  }
}

// op(x, y, &r) is a __builtin_*_overflow: true when the result does not fit.
template <typename Op>
int64_t checked(Op op, int64_t x, int64_t y) {
  int64_t r = 0;
  STOA_CHECK(!op(x, y, &r), ErrorKind::kInvalidArgument, "integer overflow");
  return r;
}
bool add(int64_t x, int64_t y, int64_t* r) {
  return __builtin_add_overflow(x, y, r);
}
bool sub(int64_t x, int64_t y, int64_t* r) {
  return __builtin_sub_overflow(x, y, r);
}
bool mul(int64_t x, int64_t y, int64_t* r) {
  return __builtin_mul_overflow(x, y, r);
}

}  // namespace

std::string Evaluator::render(const Body& body, const Dict& variables) {
  std::string out;
  out_ = &out;
  scopes_.assign(1, variables);
  try {
    exec_body(body);
  } catch (const Error& e) {
    throw Error(e.kind(), cat("chat template ", source_, " line ", line_, ": ", e.what()));
  }
  return out;
}

void Evaluator::write(const std::string& text) {
  out_->append(text);
  check_string_size(out_->size());
}

Value Evaluator::lookup(const std::string& name) const {
  for (auto scope = scopes_.rbegin(); scope != scopes_.rend(); ++scope)
    if (const Value* v = dict_find(*scope, name)) return *v;
  return global_function(name);
}

void Evaluator::assign(const std::string& name, Value value) {
  dict_set(scopes_.back(), name, std::move(value));
}

Evaluator::Flow Evaluator::exec_body(const Body& body) {
  for (const NodePtr& node : body) {
    Flow flow = exec(*node);
    if (flow != Flow::kNormal) return flow;
  }
  return Flow::kNormal;
}

Evaluator::Flow Evaluator::exec(const Node& node) {
  line_ = node.line;
  switch (node.kind) {
    case Node::Kind::kText:
      write(node.text);
      return Flow::kNormal;
    case Node::Kind::kOutput:
      write(to_output(eval(*node.expr)));
      return Flow::kNormal;
    case Node::Kind::kIf:
      for (size_t i = 0; i < node.conditions.size(); ++i) {
        line_ = node.conditions[i]->line;
        if (eval(*node.conditions[i]).truthy()) return exec_body(node.bodies[i]);
      }
      if (node.bodies.size() > node.conditions.size()) return exec_body(node.bodies.back());
      return Flow::kNormal;
    case Node::Kind::kFor:
      return exec_for(node);
    case Node::Kind::kSet:
      exec_set(node);
      return Flow::kNormal;
    case Node::Kind::kMacro:
      define_macro(node);
      return Flow::kNormal;
    case Node::Kind::kBreak:
      return Flow::kBreak;
    case Node::Kind::kContinue:
      return Flow::kContinue;
    case Node::Kind::kGeneration:
      return exec_body(node.bodies[0]);
  }
  return Flow::kNormal;
}

Evaluator::Flow Evaluator::exec_for(const Node& node) {
  List items = iteration_items(eval(*node.expr));
  // One scope for the whole loop, as Jinja2 and @huggingface/jinja have it: a plain `set` in the
  // body is seen by later iterations and forgotten after the loop.
  scopes_.emplace_back();
  if (items.empty()) {
    Flow flow = node.bodies.size() > 1 ? exec_body(node.bodies[1]) : Flow::kNormal;
    scopes_.pop_back();
    return flow;
  }
  const int64_t n = static_cast<int64_t>(items.size());
  for (int64_t i = 0; i < n; ++i) {
    STOA_CHECK(++iterations_ <= kMaxLoopIterations, ErrorKind::kInvalidArgument, "more than ",
               kMaxLoopIterations, " loop iterations");
    const Value& item = items[static_cast<size_t>(i)];
    if (node.targets.size() == 1) {
      assign(node.targets[0], item);
    } else {
      STOA_CHECK(item.kind() == K::kList && item.as_list().size() == node.targets.size(),
                 ErrorKind::kInvalidArgument, "cannot unpack ", item.type_name(), " into ",
                 node.targets.size(), " loop variables");
      for (size_t t = 0; t < node.targets.size(); ++t) assign(node.targets[t], item.as_list()[t]);
    }
    Dict loop = {{"index", Value(i + 1)},
                 {"index0", Value(i)},
                 {"revindex", Value(n - i)},
                 {"revindex0", Value(n - i - 1)},
                 {"first", Value(i == 0)},
                 {"last", Value(i == n - 1)},
                 {"length", Value(n)},
                 {"previtem", i > 0 ? items[static_cast<size_t>(i - 1)] : Value()},
                 {"nextitem", i + 1 < n ? items[static_cast<size_t>(i + 1)] : Value()}};
    assign("loop", Value(std::move(loop)));
    if (exec_body(node.bodies[0]) == Flow::kBreak) break;
  }
  scopes_.pop_back();
  return Flow::kNormal;
}

void Evaluator::exec_set(const Node& node) {
  Value value;
  if (node.expr) {
    value = eval(*node.expr);
  } else {
    std::string captured;
    std::string* saved = out_;
    out_ = &captured;
    exec_body(node.bodies[0]);
    out_ = saved;
    value = Value(std::move(captured));
  }
  line_ = node.line;
  if (!node.attribute.empty()) {
    Value target = lookup(node.targets[0]);
    STOA_CHECK(target.kind() == K::kNamespace, ErrorKind::kInvalidArgument, "cannot set '",
               node.attribute, "' on '", node.targets[0], "', ", target.type_name(),
               " (only a namespace() takes attributes)");
    dict_set(target.as_namespace().attributes, node.attribute, std::move(value));
    return;
  }
  if (node.targets.size() == 1) {
    assign(node.targets[0], std::move(value));
    return;
  }
  STOA_CHECK(value.kind() == K::kList && value.as_list().size() == node.targets.size(),
             ErrorKind::kInvalidArgument, "cannot unpack ", value.type_name(), " into ",
             node.targets.size(), " names");
  for (size_t i = 0; i < node.targets.size(); ++i) assign(node.targets[i], value.as_list()[i]);
}

void Evaluator::define_macro(const Node& node) {
  const Node* macro = &node;
  assign(node.targets[0],
         Value(std::make_shared<Callable>(Callable{node.targets[0], [this, macro](CallArgs& args) {
                                                     return call_macro(*macro, args);
                                                   }})));
}

Value Evaluator::call_macro(const Node& node, CallArgs& args) {
  STOA_CHECK(call_depth_ < kMaxCallDepth, ErrorKind::kInvalidArgument,
             "macro calls nested deeper than ", kMaxCallDepth, " (recursion?)");
  STOA_CHECK(args.positional.size() <= node.params.size(), ErrorKind::kInvalidArgument, "macro ",
             node.targets[0], " takes ", node.params.size(), " arguments, got ",
             args.positional.size());
  // A macro sees the template's globals and its own arguments, not its caller's locals.
  std::vector<Dict> caller_scopes = std::move(scopes_);
  scopes_.assign(1, caller_scopes.front());
  scopes_.emplace_back();
  std::string result;
  std::string* saved_out = out_;
  int saved_line = line_;
  ++call_depth_;
  try {
    for (size_t i = 0; i < node.params.size(); ++i) {
      const MacroParam& p = node.params[i];
      Value v;
      bool given = i < args.positional.size();
      if (given) v = args.positional[i];
      for (const auto& [k, kv] : args.keyword) {
        if (k == p.name) {
          STOA_CHECK(!given, ErrorKind::kInvalidArgument, "macro ", node.targets[0], ": argument '",
                     k, "' given twice");
          v = kv;
          given = true;
        }
      }
      if (!given && p.default_value) v = eval(*p.default_value);
      assign(p.name, std::move(v));
    }
    for (const auto& [k, kv] : args.keyword) {
      bool known = false;
      for (const MacroParam& p : node.params) known = known || p.name == k;
      STOA_CHECK(known, ErrorKind::kInvalidArgument, "macro ", node.targets[0],
                 " has no argument named '", k, "'");
    }
    out_ = &result;
    exec_body(node.bodies[0]);
  } catch (...) {
    scopes_ = std::move(caller_scopes);
    out_ = saved_out;
    --call_depth_;
    throw;
  }
  scopes_ = std::move(caller_scopes);
  out_ = saved_out;
  line_ = saved_line;
  --call_depth_;
  return Value(std::move(result));
}

CallArgs Evaluator::eval_arguments(const Expr& e, size_t first) {
  CallArgs args;
  size_t keyword_start = e.items.size() - e.keyword_names.size();
  for (size_t i = first; i < e.items.size(); ++i) {
    Value v = eval(*e.items[i]);
    if (i < keyword_start)
      args.positional.push_back(std::move(v));
    else
      args.keyword.emplace_back(e.keyword_names[i - keyword_start], std::move(v));
  }
  return args;
}

Value Evaluator::eval(const Expr& e) {
  line_ = e.line;
  switch (e.kind) {
    case Expr::Kind::kLiteral:
      return e.literal;
    case Expr::Kind::kIdentifier:
      return lookup(e.name);
    case Expr::Kind::kList:
    case Expr::Kind::kTuple: {
      List items;
      for (const ExprPtr& item : e.items) items.push_back(eval(*item));
      return Value(std::move(items));
    }
    case Expr::Kind::kDict: {
      Dict dict;
      for (size_t i = 0; i + 1 < e.items.size(); i += 2) {
        Value key = eval(*e.items[i]);
        STOA_CHECK(key.is_string(), ErrorKind::kInvalidArgument, "dict keys must be strings, got ",
                   key.type_name());
        dict_set(dict, key.as_string(), eval(*e.items[i + 1]));
      }
      return Value(std::move(dict));
    }
    case Expr::Kind::kAttribute:
      return get_attribute(eval(*e.items[0]), e.name);
    case Expr::Kind::kIndex: {
      Value object = eval(*e.items[0]);
      return get_index(object, eval(*e.items[1]));
    }
    case Expr::Kind::kSlice: {
      Value object = eval(*e.items[0]);
      auto part = [&](size_t i) { return e.items[i] ? eval(*e.items[i]) : Value(); };
      Value start = part(1), stop = part(2), step = part(3);
      return get_slice(object, start, stop, step);
    }
    case Expr::Kind::kCall: {
      Value callee = eval(*e.items[0]);
      CallArgs args = eval_arguments(e, 1);
      line_ = e.line;
      STOA_CHECK(callee.kind() == K::kCallable, ErrorKind::kInvalidArgument, callee.type_name(),
                 " is not callable");
      return callee.as_callable().call(args);
    }
    case Expr::Kind::kFilter: {
      Value operand = eval(*e.items[0]);
      CallArgs args = eval_arguments(e, 1);
      line_ = e.line;
      return apply_filter(e.name, operand, args);
    }
    case Expr::Kind::kTest: {
      Value operand = eval(*e.items[0]);
      CallArgs args = eval_arguments(e, 1);
      line_ = e.line;
      return Value(apply_test(e.name, operand, args) != e.negate);
    }
    case Expr::Kind::kUnary: {
      Value v = eval(*e.items[0]);
      if (e.name == "not") return Value(!v.truthy());
      STOA_CHECK(v.is_number(), ErrorKind::kInvalidArgument, "unary ", e.name, " on ",
                 v.type_name());
      if (e.name == "+") return v;
      if (v.kind() == K::kFloat) return Value(-v.as_double());
      return Value(checked(sub, 0, v.as_int()));
    }
    case Expr::Kind::kBinary:
      return eval_binary(e);
    case Expr::Kind::kTernary: {
      if (eval(*e.items[1]).truthy()) return eval(*e.items[0]);
      return e.items[2] ? eval(*e.items[2]) : Value();
    }
  }
  return Value();
}

Value Evaluator::eval_binary(const Expr& e) {
  const std::string& op = e.name;
  Value a = eval(*e.items[0]);
  // and/or return an operand, as Python's do, and skip the right side when they can.
  if (op == "and") return a.truthy() ? eval(*e.items[1]) : a;
  if (op == "or") return a.truthy() ? a : eval(*e.items[1]);
  Value b = eval(*e.items[1]);
  line_ = e.line;
  if (op == "==") return Value(values_equal(a, b));
  if (op == "!=") return Value(!values_equal(a, b));
  if (op == "in") return Value(contains(b, a));
  if (op == "not in") return Value(!contains(b, a));
  if (op == "~") {
    std::string s = to_output(a) + to_output(b);
    check_string_size(s.size());
    return Value(std::move(s));
  }
  if (op == "<" || op == ">" || op == "<=" || op == ">=") {
    int order = 0;
    if (a.is_number() && b.is_number()) {
      order = a.as_double() < b.as_double() ? -1 : a.as_double() > b.as_double() ? 1 : 0;
      if (a.kind() == K::kInt && b.kind() == K::kInt)
        order = a.as_int() < b.as_int() ? -1 : a.as_int() > b.as_int() ? 1 : 0;
    } else if (a.is_string() && b.is_string()) {
      order = a.as_string().compare(b.as_string());
    } else {
      fail(ErrorKind::kInvalidArgument, "cannot compare ", a.type_name(), " with ", b.type_name(),
           " using ", op);
    }
    if (op == "<") return Value(order < 0);
    if (op == ">") return Value(order > 0);
    if (op == "<=") return Value(order <= 0);
    return Value(order >= 0);
  }
  return arithmetic(op, a, b);
}

Value Evaluator::arithmetic(const std::string& op, const Value& a, const Value& b) {
  if (op == "+" && a.is_string() && b.is_string()) {
    check_string_size(a.as_string().size() + b.as_string().size());
    return Value(a.as_string() + b.as_string());
  }
  if (op == "+" && a.kind() == K::kList && b.kind() == K::kList) {
    check_list_size(a.as_list().size() + b.as_list().size());
    List joined = a.as_list();
    joined.insert(joined.end(), b.as_list().begin(), b.as_list().end());
    return Value(std::move(joined));
  }
  if (op == "*" && (a.is_string() || a.kind() == K::kList) && b.kind() == K::kInt) {
    int64_t times = std::max<int64_t>(0, b.as_int());
    if (a.is_string()) {
      check_string_size(static_cast<size_t>(std::min<int64_t>(times, kMaxStringBytes + 1)) *
                        a.as_string().size());
      std::string out;
      for (int64_t i = 0; i < times; ++i) out += a.as_string();
      return Value(std::move(out));
    }
    check_list_size(static_cast<size_t>(std::min<int64_t>(times, kMaxListItems + 1)) *
                    a.as_list().size());
    List out;
    for (int64_t i = 0; i < times; ++i)
      out.insert(out.end(), a.as_list().begin(), a.as_list().end());
    return Value(std::move(out));
  }
  STOA_CHECK(a.is_number() && b.is_number(), ErrorKind::kInvalidArgument, "cannot apply '", op,
             "' to ", a.type_name(), " and ", b.type_name());
  bool ints = a.kind() == K::kInt && b.kind() == K::kInt;
  if (ints && op != "/") {
    int64_t x = a.as_int(), y = b.as_int();
    if (op == "+") return Value(checked(add, x, y));
    if (op == "-") return Value(checked(sub, x, y));
    if (op == "*") return Value(checked(mul, x, y));
    if (op == "//" || op == "%") {
      STOA_CHECK(y != 0, ErrorKind::kInvalidArgument, "division by zero");
      STOA_CHECK(!(x == INT64_MIN && y == -1), ErrorKind::kInvalidArgument, "integer overflow");
      int64_t q = x / y, m = x % y;
      if (m != 0 && ((m < 0) != (y < 0))) {  // Python floors
        --q;
        m += y;
      }
      return Value(op == "//" ? q : m);
    }
    if (op == "**") {
      STOA_CHECK(y >= 0, ErrorKind::kInvalidArgument, "negative integer power");
      if (x == 0 || x == 1) return Value(y == 0 ? int64_t{1} : x);
      if (x == -1) return Value(y % 2 == 0 ? int64_t{1} : int64_t{-1});
      int64_t result = 1;  // |x| >= 2 overflows within 63 steps: the loop is short
      for (int64_t i = 0; i < y; ++i) result = checked(mul, result, x);
      return Value(result);
    }
  }
  double x = a.as_double(), y = b.as_double();
  if (op == "+") return Value(x + y);
  if (op == "-") return Value(x - y);
  if (op == "*") return Value(x * y);
  STOA_CHECK(op == "**" || y != 0.0, ErrorKind::kInvalidArgument, "division by zero");
  if (op == "/") return Value(x / y);
  if (op == "//") return Value(std::floor(x / y));
  if (op == "%") return Value(x - y * std::floor(x / y));
  if (op == "**") return Value(std::pow(x, y));
  fail(ErrorKind::kInvalidArgument, "unknown operator '", op, "'");
}

}  // namespace stoa::jinja
