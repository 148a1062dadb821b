// A parsed Jinja template (the subset chat templates use; see parser.h and builtins.h) and its
// renderer. Rendering is bounded: at most kMaxLoopIterations loop iterations in all, macro calls
// nested at most kMaxCallDepth deep, and no string, list or output beyond builtins.h's limits,
// so a template downloaded from a hub cannot hang a worker or exhaust its memory or stack.
#pragma once
#include <memory>
#include <string>
#include <string_view>

#include "model/jinja/ast.h"
#include "model/jinja/value.h"

namespace stoa::jinja {

inline constexpr int64_t kMaxLoopIterations = 100'000;
inline constexpr int kMaxCallDepth = 16;

class Template {
 public:
  // Throws stoa::Error(kBadFormat) naming `source` and the line on a syntax error, an unknown
  // filter or test, or text that is not UTF-8.
  static Template parse(std::string_view text, std::string source);

  // Renders with `variables` as the template's globals. Throws stoa::Error(kInvalidArgument)
  // naming the source and line on raise_exception, a type error or an exceeded bound.
  std::string render(const Dict& variables) const;

  const std::string& source() const { return source_; }

 private:
  Template(std::shared_ptr<const Body> body, std::string source)
      : body_(std::move(body)), source_(std::move(source)) {}
  std::shared_ptr<const Body> body_;
  std::string source_;
};

}  // namespace stoa::jinja
