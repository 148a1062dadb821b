// Walks a parsed template: statements write to the output, expressions compute Values. Holds
// the variable scopes (one per loop iteration and macro call, as Jinja scopes them: `set` inside
// a loop does not leak out of it, which is why templates use namespace()) and the bounds.
#pragma once
#include <string>
#include <vector>

#include "model/jinja/ast.h"
#include "model/jinja/value.h"

namespace stoa::jinja {

class Evaluator {
 public:
  explicit Evaluator(const std::string& source) : source_(source) {}
  // Throws stoa::Error(kInvalidArgument) naming the source and the line of the failing node.
  std::string render(const Body& body, const Dict& variables);

 private:
  enum class Flow { kNormal, kBreak, kContinue };

  Flow exec_body(const Body& body);
  Flow exec(const Node& node);
  Flow exec_for(const Node& node);
  void exec_set(const Node& node);
  void define_macro(const Node& node);
  Value call_macro(const Node& node, CallArgs& args);
  void write(const std::string& text);

  Value eval(const Expr& e);
  Value eval_binary(const Expr& e);
  Value arithmetic(const std::string& op, const Value& a, const Value& b);
  CallArgs eval_arguments(const Expr& e, size_t first);
  Value lookup(const std::string& name) const;
  void assign(const std::string& name, Value value);

  const std::string& source_;
  std::vector<Dict> scopes_;
  std::string* out_ = nullptr;
  int line_ = 0;
  int64_t iterations_ = 0;
  int call_depth_ = 0;
};

}  // namespace stoa::jinja
