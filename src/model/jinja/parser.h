// Recursive-descent parser for the Jinja subset chat templates use: text, {{ }}, if/elif/else,
// for (with loop.*, else, break, continue), set (name, tuple, ns.attribute, block form),
// macro, generation (rendered as is), and Python-like expressions with filters, tests, calls,
// attributes, indexing and slicing. Nesting is limited (kMaxNesting) so a hostile template cannot
// exhaust the stack.
#pragma once
#include <string>
#include <vector>

#include "model/jinja/ast.h"
#include "model/jinja/lexer.h"

namespace stoa::jinja {

inline constexpr int kMaxNesting = 32;
inline constexpr int kMaxExpressionDepth = 128;

// Throws stoa::Error(kBadFormat) naming `source` and the line on a syntax error or an unknown
// filter or test.
Body parse(const std::vector<Token>& tokens, const std::string& source);

}  // namespace stoa::jinja
