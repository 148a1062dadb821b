// Splits a template into text and tag tokens, applying Hugging Face's chat-template whitespace
// rules as the tokens are made: one trailing newline of the template dropped, trim_blocks (the
// newline after a block or comment tag dropped), lstrip_blocks (spaces and tabs from a line's
// start up to a block or comment tag dropped), and the `-` markers ({%- -%} {{- -}} {#- -#}).
// Lines are counted in the original text so errors name the line the author sees.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace stoa::jinja {

struct Token {
  enum class Kind {
    kText,
    kBlockOpen,    // {%
    kBlockClose,   // %}
    kOutputOpen,   // {{
    kOutputClose,  // }}
    kName,
    kString,
    kInteger,
    kFloat,
    kOperator,  // + - * / // % ** ~ == != < > <= >= = | . , : ( ) [ ] { }
    kEnd,
  };
  Kind kind;
  std::string text;  // text, name, decoded string literal, number spelling or operator
  int line;
};

// Throws stoa::Error(kBadFormat) naming `source` and the line on an unterminated tag, string or
// comment, or a character no token starts with. Precondition: valid UTF-8 (Template::parse checks).
std::vector<Token> tokenize(std::string_view source_text, const std::string& source);

// The whitespace Jinja's `-` markers, trim and strip() remove: the byte length of the whitespace
// character at `text[at]`, 0 if there is none. Precondition: `text` is valid UTF-8.
size_t whitespace_length(std::string_view text, size_t at);

}  // namespace stoa::jinja
