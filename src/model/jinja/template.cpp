#include "model/jinja/template.h"

#include "core/error.h"
#include "model/jinja/evaluator.h"
#include "model/jinja/lexer.h"
#include "model/jinja/parser.h"
#include "model/unicode.h"

namespace stoa::jinja {

Template Template::parse(std::string_view text, std::string source) {
  STOA_CHECK(unicode::is_valid_utf8(text), ErrorKind::kBadFormat, source, ": not valid UTF-8");
  auto body = std::make_shared<Body>(jinja::parse(tokenize(text, source), source));
  return Template(std::move(body), std::move(source));
}

std::string Template::render(const Dict& variables) const {
  return Evaluator(source_).render(*body_, variables);
}

}  // namespace stoa::jinja
