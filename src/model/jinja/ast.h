// The parsed form of a template: expressions and statements, each with the template line it
// came from (errors name it).
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "model/jinja/value.h"

namespace stoa::jinja {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  enum class Kind {
    kLiteral,     // literal
    kIdentifier,  // name
    kList,        // items
    kTuple,       // items (only as a for/set target or in parentheses)
    kDict,        // items: key, value, key, value, ...
    kAttribute,   // items[0] . name
    kIndex,       // items[0] [ items[1] ]
    kSlice,       // items[0] [ items[1] : items[2] : items[3] ], absent parts are null
    kCall,        // items[0] ( items[1..] ), the last keyword_names.size() of them by name
    kFilter,      // items[0] | name ( items[1..] )
    kTest,        // items[0] is [not] name ( items[1..] )
    kUnary,       // op items[0]: "not", "-", "+"
    kBinary,      // items[0] op items[1]: or and == != < > <= >= in "not in" + - ~ * / // % **
    kTernary,     // items[0] if items[1] else items[2] (items[2] null: undefined)
  };
  Kind kind;
  int line = 0;
  int depth = 1;  // of the tree below, bounded by the parser
  Value literal;
  std::string name;  // identifier, attribute, filter, test or operator
  bool negate = false;
  std::vector<ExprPtr> items;
  std::vector<std::string> keyword_names;  // call/filter/test: names of the trailing arguments
};

struct Node;
using NodePtr = std::unique_ptr<Node>;
using Body = std::vector<NodePtr>;

struct MacroParam {
  std::string name;
  ExprPtr default_value;  // null: required
};

struct Node {
  enum class Kind {
    kText,    // text
    kOutput,  // {{ expr }}
    kIf,      // conditions[i] -> bodies[i]; bodies.size() == conditions.size() + 1 with else
    kFor,     // for targets in expr: bodies[0]; else bodies[1]
    kSet,     // set targets (or target.attribute) = expr; block form: bodies[0]
    kMacro,   // macro name(params): bodies[0]
    kBreak,
    kContinue,
    kGeneration,  // {% generation %} bodies[0] {% endgeneration %}: rendered as is
  };
  Kind kind;
  int line = 0;
  std::string text;
  ExprPtr expr;
  std::vector<ExprPtr> conditions;
  std::vector<Body> bodies;
  std::vector<std::string> targets;  // for/set variable names; macro: its name in targets[0]
  std::string attribute;             // set ns.attribute = ...
  std::vector<MacroParam> params;
};

}  // namespace stoa::jinja
