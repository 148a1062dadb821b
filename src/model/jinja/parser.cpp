#include "model/jinja/parser.h"

#include <set>

#include "core/error.h"
#include "model/jinja/builtins.h"

namespace stoa::jinja {

namespace {

using K = Token::Kind;

class Parser {
 public:
  Parser(const std::vector<Token>& tokens, const std::string& source)
      : tokens_(tokens), source_(source) {}

  Body parse_template() {
    Body body = parse_body({});
    if (peek().kind != K::kEnd) error(peek().line, "unexpected '" + block_name() + "'");
    return body;
  }

 private:
  [[noreturn]] void error(int line, const std::string& what) const {
    fail(ErrorKind::kBadFormat, source_, " line ", line, ": ", what);
  }

  const Token& peek(size_t ahead = 0) const {
    size_t i = std::min(pos_ + ahead, tokens_.size() - 1);
    return tokens_[i];
  }
  const Token& next() {
    const Token& t = peek();
    if (pos_ < tokens_.size() - 1) ++pos_;
    return t;
  }
  bool at_op(const char* op) const { return peek().kind == K::kOperator && peek().text == op; }
  bool at_name(const char* name, size_t ahead = 0) const {
    return peek(ahead).kind == K::kName && peek(ahead).text == name;
  }
  void expect_op(const char* op) {
    if (!at_op(op)) error(peek().line, std::string("expected '") + op + "', found " + describe());
    next();
  }
  void expect_kind(K kind, const char* what) {
    if (peek().kind != kind)
      error(peek().line, std::string("expected ") + what + ", found " + describe());
    next();
  }
  std::string expect_name() {
    if (peek().kind != K::kName) error(peek().line, "expected a name, found " + describe());
    return next().text;
  }
  std::string describe() const {
    const Token& t = peek();
    switch (t.kind) {
      case K::kEnd:
        return "the end of the template";
      case K::kText:
        return "text";
      case K::kString:
        return "a string";
      default:
        return "'" + t.text + "'";
    }
  }
  // The keyword of the block tag at the cursor ("endif"), or "" if the cursor is not at one.
  std::string block_name() const {
    if (peek().kind == K::kBlockOpen && peek(1).kind == K::kName) return peek(1).text;
    return peek().kind == K::kEnd ? "" : peek().text;
  }

  struct DepthGuard {
    DepthGuard(Parser& p, int line) : p(p) {
      if (++p.depth_ > kMaxNesting)
        p.error(line, "nesting deeper than " + std::to_string(kMaxNesting) + " levels");
    }
    ~DepthGuard() { --p.depth_; }
    Parser& p;
  };

  // Statements until a block tag named in `stops` (left unconsumed) or the end.
  Body parse_body(const std::set<std::string>& stops) {
    Body body;
    while (peek().kind != K::kEnd) {
      const Token& t = peek();
      if (t.kind == K::kText) {
        auto node = std::make_unique<Node>();
        node->kind = Node::Kind::kText;
        node->line = t.line;
        node->text = t.text;
        body.push_back(std::move(node));
        next();
      } else if (t.kind == K::kOutputOpen) {
        auto node = std::make_unique<Node>();
        node->kind = Node::Kind::kOutput;
        node->line = t.line;
        next();
        node->expr = parse_expression();
        expect_kind(K::kOutputClose, "'}}'");
        body.push_back(std::move(node));
      } else if (t.kind == K::kBlockOpen) {
        std::string name = block_name();
        if (stops.count(name)) return body;
        body.push_back(parse_block());
      } else {
        error(t.line, "unexpected " + describe() + " outside a tag");
      }
    }
    if (!stops.empty()) {
      std::string wanted;
      for (const auto& s : stops) wanted += (wanted.empty() ? "" : " or ") + s;
      error(peek().line, "the template ends before {% " + wanted + " %}");
    }
    return body;
  }

  void expect_end_tag(const char* name) {
    expect_kind(K::kBlockOpen, "'{%'");
    if (!at_name(name)) error(peek().line, std::string("expected ") + name);
    next();
    expect_kind(K::kBlockClose, "'%}'");
  }

  // The end of an if or a for: an optional `{% else %}` body, then `{% end %}`.
  void parse_else_and_end(Node& node, const char* end) {
    if (block_name() == "else") {
      next();
      next();
      expect_kind(K::kBlockClose, "'%}'");
      node.bodies.push_back(parse_body({end}));
    }
    expect_end_tag(end);
  }

  // The names after a `for` or `set` target's first one: `, name` as often as it comes.
  void parse_more_targets(Node& node) {
    while (at_op(",")) {
      next();
      node.targets.push_back(expect_name());
    }
  }

  NodePtr parse_block() {
    int line = peek().line;
    DepthGuard guard(*this, line);
    next();  // {%
    if (peek().kind != K::kName) error(line, "expected a statement name after '{%'");
    std::string keyword = next().text;
    auto node = std::make_unique<Node>();
    node->line = line;
    if (keyword == "if") {
      node->kind = Node::Kind::kIf;
      node->conditions.push_back(parse_expression());
      expect_kind(K::kBlockClose, "'%}'");
      node->bodies.push_back(parse_body({"elif", "else", "endif"}));
      while (block_name() == "elif") {
        next();
        next();
        node->conditions.push_back(parse_expression());
        expect_kind(K::kBlockClose, "'%}'");
        node->bodies.push_back(parse_body({"elif", "else", "endif"}));
      }
      parse_else_and_end(*node, "endif");
    } else if (keyword == "for") {
      node->kind = Node::Kind::kFor;
      node->targets.push_back(expect_name());
      parse_more_targets(*node);
      if (!at_name("in")) error(peek().line, "expected 'in' in a for loop, found " + describe());
      next();
      // Not the full expression: a trailing `if` would be a loop filter, which is not supported.
      node->expr = parse_or();
      if (at_name("if"))
        error(peek().line, "loop filters ({% for x in y if z %}) are not supported");
      expect_kind(K::kBlockClose, "'%}'");
      ++loop_depth_;
      node->bodies.push_back(parse_body({"else", "endfor"}));
      --loop_depth_;
      parse_else_and_end(*node, "endfor");
    } else if (keyword == "set") {
      node->kind = Node::Kind::kSet;
      node->targets.push_back(expect_name());
      if (at_op(".")) {
        next();
        node->attribute = expect_name();
      } else {
        parse_more_targets(*node);
      }
      if (at_op("=")) {
        next();
        node->expr = parse_tuple_or_expression();
        expect_kind(K::kBlockClose, "'%}'");
      } else {
        if (node->targets.size() != 1 || !node->attribute.empty())
          error(line, "a block {% set %} takes one plain name");
        expect_kind(K::kBlockClose, "'%}'");
        node->bodies.push_back(parse_body({"endset"}));
        expect_end_tag("endset");
      }
    } else if (keyword == "macro") {
      node->kind = Node::Kind::kMacro;
      node->targets.push_back(expect_name());
      expect_op("(");
      std::set<std::string> seen;
      while (!at_op(")")) {
        MacroParam param;
        param.name = expect_name();
        if (!seen.insert(param.name).second)
          error(line, "macro parameter '" + param.name + "' twice");
        if (at_op("=")) {
          next();
          param.default_value = parse_expression();
        } else if (!node->params.empty() && node->params.back().default_value) {
          error(line, "macro parameter '" + param.name + "' without a default follows one with");
        }
        node->params.push_back(std::move(param));
        if (!at_op(",")) break;
        next();
      }
      expect_op(")");
      expect_kind(K::kBlockClose, "'%}'");
      node->bodies.push_back(parse_body({"endmacro"}));
      expect_end_tag("endmacro");
    } else if (keyword == "generation") {
      // transformers marks the assistant's text with it (return_assistant_tokens_mask); the
      // text renders unchanged.
      node->kind = Node::Kind::kGeneration;
      expect_kind(K::kBlockClose, "'%}'");
      node->bodies.push_back(parse_body({"endgeneration"}));
      expect_end_tag("endgeneration");
    } else if (keyword == "break" || keyword == "continue") {
      if (loop_depth_ == 0) error(line, "{% " + keyword + " %} outside a for loop");
      node->kind = keyword == "break" ? Node::Kind::kBreak : Node::Kind::kContinue;
      expect_kind(K::kBlockClose, "'%}'");
    } else if (keyword.rfind("end", 0) == 0 || keyword == "elif" || keyword == "else") {
      error(line, "unexpected {% " + keyword + " %}: no open block takes it here");
    } else {
      error(line, "unknown statement '" + keyword + "'");
    }
    return node;
  }

  ExprPtr make(Expr::Kind kind, int line) {
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    e->line = line;
    return e;
  }

  ExprPtr parse_tuple_or_expression() {
    int line = peek().line;
    ExprPtr first = parse_expression();
    if (!at_op(",")) return first;
    ExprPtr tuple = make(Expr::Kind::kTuple, line);
    tuple->items.push_back(std::move(first));
    while (at_op(",")) {
      next();
      tuple->items.push_back(parse_expression());
    }
    return tuple;
  }

  ExprPtr parse_expression() {
    DepthGuard guard(*this, peek().line);
    int line = peek().line;
    ExprPtr value = parse_or();
    if (!at_name("if")) return value;
    next();
    ExprPtr ternary = make(Expr::Kind::kTernary, line);
    ternary->items.push_back(std::move(value));
    ternary->items.push_back(parse_or());
    if (at_name("else")) {
      next();
      ternary->items.push_back(parse_expression());
    } else {
      ternary->items.push_back(nullptr);
    }
    return ternary;
  }

  // Operator and postfix chains (a + b + c ..., a.b.c ...) build their trees in loops, not by
  // recursion: bound the tree's depth here so evaluating it cannot exhaust the stack either.
  ExprPtr& checked(ExprPtr& e) {
    for (const ExprPtr& item : e->items)
      if (item) e->depth = std::max(e->depth, item->depth + 1);
    if (e->depth > kMaxExpressionDepth)
      error(e->line, "expression nested deeper than " + std::to_string(kMaxExpressionDepth));
    return e;
  }

  ExprPtr binary(std::string op, ExprPtr lhs, ExprPtr rhs, int line) {
    ExprPtr e = make(Expr::Kind::kBinary, line);
    e->name = std::move(op);
    e->items.push_back(std::move(lhs));
    e->items.push_back(std::move(rhs));
    return std::move(checked(e));
  }

  // `operand (keyword operand)*`, grouped to the left: one loop for the `or` and `and` levels.
  ExprPtr parse_keyword_chain(const char* keyword, ExprPtr (Parser::*operand)()) {
    ExprPtr lhs = (this->*operand)();
    while (at_name(keyword)) {
      int line = next().line;
      lhs = binary(keyword, std::move(lhs), (this->*operand)(), line);
    }
    return lhs;
  }
  ExprPtr parse_or() { return parse_keyword_chain("or", &Parser::parse_and); }
  ExprPtr parse_and() { return parse_keyword_chain("and", &Parser::parse_not); }
  ExprPtr parse_not() {
    if (!at_name("not")) return parse_compare();
    DepthGuard guard(*this, peek().line);
    ExprPtr e = make(Expr::Kind::kUnary, next().line);
    e->name = "not";
    e->items.push_back(parse_not());
    return e;
  }
  ExprPtr parse_compare() {
    ExprPtr lhs = parse_additive();
    while (true) {
      std::string op;
      if (at_name("not") && at_name("in", 1)) {
        op = "not in";
      } else if (at_name("in")) {
        op = "in";
      } else if (peek().kind == K::kOperator &&
                 (peek().text == "==" || peek().text == "!=" || peek().text == "<" ||
                  peek().text == ">" || peek().text == "<=" || peek().text == ">=")) {
        op = peek().text;
      } else {
        return lhs;
      }
      int line = next().line;
      if (op == "not in") next();
      lhs = binary(op, std::move(lhs), parse_additive(), line);
    }
  }
  ExprPtr parse_additive() {
    ExprPtr lhs = parse_multiplicative();
    while (at_op("+") || at_op("-") || at_op("~")) {
      const Token& op = next();
      lhs = binary(op.text, std::move(lhs), parse_multiplicative(), op.line);
    }
    return lhs;
  }
  ExprPtr parse_multiplicative() {
    ExprPtr lhs = parse_unary();
    while (at_op("*") || at_op("/") || at_op("//") || at_op("%")) {
      const Token& op = next();
      lhs = binary(op.text, std::move(lhs), parse_unary(), op.line);
    }
    return lhs;
  }
  ExprPtr parse_unary() {
    if (at_op("-") || at_op("+")) {
      DepthGuard guard(*this, peek().line);
      const Token& op = next();
      ExprPtr e = make(Expr::Kind::kUnary, op.line);
      e->name = op.text;
      e->items.push_back(parse_unary());
      return e;
    }
    return parse_power();
  }
  ExprPtr parse_power() {
    ExprPtr lhs = parse_filtered();
    while (at_op("**")) {
      const Token& op = next();
      lhs = binary(op.text, std::move(lhs), parse_filtered(), op.line);
    }
    return lhs;
  }

  // Arguments after '(' up to ')': positional, then name=value.
  void parse_arguments(Expr& call) {
    expect_op("(");
    while (!at_op(")")) {
      if (peek().kind == K::kName && peek(1).kind == K::kOperator && peek(1).text == "=") {
        call.keyword_names.push_back(next().text);
        next();
        call.items.push_back(parse_expression());
      } else {
        if (!call.keyword_names.empty())
          error(peek().line, "a positional argument follows a keyword argument");
        call.items.push_back(parse_expression());
      }
      if (!at_op(",")) break;
      next();
    }
    expect_op(")");
  }

  // primary, then .name [index] (call) postfixes, then | filters, then `is` tests.
  ExprPtr parse_filtered() {
    ExprPtr e = parse_postfix(parse_primary());
    while (at_op("|")) {
      int line = next().line;
      ExprPtr f = make(Expr::Kind::kFilter, line);
      f->name = expect_name();
      if (!is_filter(f->name)) error(line, "unknown filter '" + f->name + "'");
      f->items.push_back(std::move(e));
      if (at_op("(")) parse_arguments(*f);
      e = parse_postfix(std::move(checked(f)));
    }
    while (at_name("is")) {
      int line = next().line;
      ExprPtr t = make(Expr::Kind::kTest, line);
      if (at_name("not")) {
        next();
        t->negate = true;
      }
      t->name = expect_name();
      if (!is_test(t->name)) error(line, "unknown test '" + t->name + "'");
      t->items.push_back(std::move(e));
      if (at_op("(")) parse_arguments(*t);
      e = std::move(checked(t));
    }
    return e;
  }

  ExprPtr parse_postfix(ExprPtr e) {
    while (true) {
      if (at_op(".")) {
        int line = next().line;
        ExprPtr a = make(Expr::Kind::kAttribute, line);
        if (peek().kind == K::kInteger) {  // x.0 is x[0] in Jinja
          a->kind = Expr::Kind::kIndex;
          a->items.push_back(std::move(e));
          ExprPtr index = make(Expr::Kind::kLiteral, line);
          index->literal = Value(static_cast<int64_t>(std::stoll(next().text)));
          a->items.push_back(std::move(index));
        } else {
          a->name = expect_name();
          a->items.push_back(std::move(e));
        }
        e = std::move(a);
      } else if (at_op("[")) {
        int line = next().line;
        DepthGuard guard(*this, line);
        ExprPtr parts[3];
        int colons = 0;
        while (!at_op("]")) {
          if (at_op(":")) {
            if (++colons > 2) error(line, "a slice takes at most start:stop:step");
            next();
          } else {
            if (parts[colons]) error(peek().line, "expected ':' or ']', found " + describe());
            parts[colons] = parse_expression();
          }
        }
        next();
        if (colons == 0 && !parts[0]) error(line, "empty subscript []");
        ExprPtr s = make(colons == 0 ? Expr::Kind::kIndex : Expr::Kind::kSlice, line);
        s->items.push_back(std::move(e));
        s->items.push_back(std::move(parts[0]));
        if (colons > 0) {
          s->items.push_back(std::move(parts[1]));
          s->items.push_back(std::move(parts[2]));
        }
        e = std::move(s);
      } else if (at_op("(")) {
        DepthGuard guard(*this, peek().line);
        ExprPtr c = make(Expr::Kind::kCall, peek().line);
        c->items.push_back(std::move(e));
        parse_arguments(*c);
        e = std::move(c);
      } else {
        return e;
      }
      checked(e);
    }
  }

  ExprPtr parse_primary() {
    const Token& t = peek();
    int line = t.line;
    switch (t.kind) {
      case K::kString: {
        ExprPtr e = make(Expr::Kind::kLiteral, line);
        std::string s;
        while (peek().kind == K::kString) s += next().text;  // "a" "b" is "ab", as in Python
        e->literal = Value(std::move(s));
        return e;
      }
      case K::kInteger:
      case K::kFloat: {
        ExprPtr e = make(Expr::Kind::kLiteral, line);
        try {
          e->literal = t.kind == K::kInteger ? Value(static_cast<int64_t>(std::stoll(t.text)))
                                             : Value(std::stod(t.text));
        } catch (const std::out_of_range&) {
          error(line, "number " + t.text + " is out of range");
        }
        next();
        return e;
      }
      case K::kName: {
        next();
        ExprPtr e = make(Expr::Kind::kLiteral, line);
        if (t.text == "true" || t.text == "True") {
          e->literal = Value(true);
        } else if (t.text == "false" || t.text == "False") {
          e->literal = Value(false);
        } else if (t.text == "none" || t.text == "None") {
          e->literal = Value::none();
        } else {
          e->kind = Expr::Kind::kIdentifier;
          e->name = t.text;
        }
        return e;
      }
      case K::kOperator: {
        if (t.text == "(") {
          next();
          ExprPtr inner = parse_tuple_or_expression();
          expect_op(")");
          return inner;
        }
        if (t.text == "[" || t.text == "{") {
          DepthGuard guard(*this, line);
          bool list = t.text == "[";
          next();
          ExprPtr e = make(list ? Expr::Kind::kList : Expr::Kind::kDict, line);
          const char* close = list ? "]" : "}";
          while (!at_op(close)) {
            e->items.push_back(parse_expression());
            if (!list) {
              expect_op(":");
              e->items.push_back(parse_expression());
            }
            if (!at_op(",")) break;
            next();
          }
          expect_op(close);
          return e;
        }
        break;
      }
      default:
        break;
    }
    error(line, "expected a value, found " + describe());
  }

  const std::vector<Token>& tokens_;
  const std::string& source_;
  size_t pos_ = 0;
  int depth_ = 0;
  int loop_depth_ = 0;
};

}  // namespace

Body parse(const std::vector<Token>& tokens, const std::string& source) {
  return Parser(tokens, source).parse_template();
}

}  // namespace stoa::jinja
