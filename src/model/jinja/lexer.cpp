#include "model/jinja/lexer.h"

#include <algorithm>

#include "core/error.h"
#include "model/unicode.h"

namespace stoa::jinja {

namespace {

bool is_name_start(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
bool is_digit(char c) {
  return c >= '0' && c <= '9';
}

class Lexer {
 public:
  Lexer(std::string_view text, const std::string& source) : text_(text), source_(source) {
    // Jinja's keep_trailing_newline=False: a template's final newline is not output.
    if (!text_.empty() && text_.back() == '\n') text_.remove_suffix(1);
  }

  std::vector<Token> run() {
    while (pos_ < text_.size()) {
      size_t tag = find_tag(pos_);
      if (tag > pos_) emit_text(pos_, tag);
      pos_ = tag;
      if (pos_ >= text_.size()) break;
      lex_tag();
    }
    tokens_.push_back({Token::Kind::kEnd, "", line_});
    return std::move(tokens_);
  }

 private:
  [[noreturn]] void error(int line, const std::string& what) {
    fail(ErrorKind::kBadFormat, source_, " line ", line, ": ", what);
  }

  size_t find_tag(size_t from) const {
    for (size_t i = from; i + 1 < text_.size(); ++i) {
      if (text_[i] == '{' && (text_[i + 1] == '%' || text_[i + 1] == '{' || text_[i + 1] == '#'))
        return i;
    }
    return text_.size();
  }

  void advance_to(size_t to) {
    line_ += static_cast<int>(std::count(text_.begin() + pos_, text_.begin() + to, '\n'));
    pos_ = to;
  }

  void emit_text(size_t begin, size_t end) {
    std::string_view piece = text_.substr(begin, end - begin);
    int line = line_;
    // lstrip_blocks: a block or comment tag alone after indentation takes the indentation away.
    bool block_follows = end + 1 < text_.size() && (text_[end + 1] == '%' || text_[end + 1] == '#');
    if (block_follows) {
      size_t cut = piece.size();
      while (cut > 0 && (piece[cut - 1] == ' ' || piece[cut - 1] == '\t')) --cut;
      size_t line_start = begin + cut;
      if (cut < piece.size() && (line_start == 0 || text_[line_start - 1] == '\n'))
        piece = piece.substr(0, cut);
    }
    advance_to(end);
    if (!piece.empty()) tokens_.push_back({Token::Kind::kText, std::string(piece), line});
  }

  // {%- / {{- / {#-: the text before loses its trailing whitespace.
  void strip_previous_text() {
    if (tokens_.empty() || tokens_.back().kind != Token::Kind::kText) return;
    std::string& t = tokens_.back().text;
    size_t end = t.size();
    while (end > 0) {
      // Step back one UTF-8 character.
      size_t start = end - 1;
      while (start > 0 && (static_cast<unsigned char>(t[start]) & 0xC0) == 0x80) --start;
      if (whitespace_length(t, start) != end - start) break;
      end = start;
    }
    t.resize(end);
    if (t.empty()) tokens_.pop_back();
  }

  void skip_whitespace_after_tag() {
    size_t at = pos_;
    while (at < text_.size()) {
      size_t n = whitespace_length(text_, at);
      if (n == 0) break;
      at += n;
    }
    advance_to(at);
  }

  void lex_tag() {
    char second = text_[pos_ + 1];
    int open_line = line_;
    bool strip_before = pos_ + 2 < text_.size() && text_[pos_ + 2] == '-';
    if (second == '#') {
      size_t close = text_.find("#}", pos_ + 2);
      if (close == std::string_view::npos) error(open_line, "comment {# is never closed by #}");
      bool strip_after = close > pos_ + 2 && text_[close - 1] == '-';
      if (strip_before) strip_previous_text();
      advance_to(close + 2);
      if (strip_after) {
        skip_whitespace_after_tag();
      } else if (pos_ < text_.size() && text_[pos_] == '\n') {
        advance_to(pos_ + 1);  // trim_blocks
      }
      return;
    }
    bool block = second == '%';
    if (strip_before) strip_previous_text();
    tokens_.push_back({block ? Token::Kind::kBlockOpen : Token::Kind::kOutputOpen,
                       block ? "{%" : "{{", open_line});
    advance_to(pos_ + (strip_before ? 3 : 2));
    lex_inside(block, open_line);
  }

  // Tokens up to the matching %} or }}.
  void lex_inside(bool block, int open_line) {
    const char* close = block ? "%}" : "}}";
    int brace_depth = 0;  // dict literals inside {{ }} also end in '}'
    while (true) {
      while (pos_ < text_.size()) {
        size_t n = whitespace_length(text_, pos_);
        if (n == 0) break;
        advance_to(pos_ + n);
      }
      if (pos_ >= text_.size())
        error(open_line, std::string(block ? "{%" : "{{") + " is never closed by " + close);
      char c = text_[pos_];
      bool dash_close = c == '-' && pos_ + 2 < text_.size() && text_[pos_ + 1] == close[0] &&
                        text_[pos_ + 2] == '}';
      if (dash_close || (brace_depth == 0 && text_.substr(pos_, 2) == close)) {
        tokens_.push_back(
            {block ? Token::Kind::kBlockClose : Token::Kind::kOutputClose, close, line_});
        advance_to(pos_ + (dash_close ? 3 : 2));
        if (dash_close) {
          skip_whitespace_after_tag();
        } else if (block && pos_ < text_.size() && text_[pos_] == '\n') {
          advance_to(pos_ + 1);  // trim_blocks
        }
        return;
      }
      if (c == '\'' || c == '"') {
        lex_string(c);
      } else if (is_digit(c)) {
        lex_number();
      } else if (is_name_start(c)) {
        size_t end = pos_;
        while (end < text_.size() && (is_name_start(text_[end]) || is_digit(text_[end]))) ++end;
        tokens_.push_back({Token::Kind::kName, std::string(text_.substr(pos_, end - pos_)), line_});
        advance_to(end);
      } else {
        static const char* kTwo[] = {"//", "**", "==", "!=", "<=", ">="};
        std::string op(1, c);
        for (const char* two : kTwo)
          if (text_.substr(pos_, 2) == two) op = two;
        if (op.size() == 1 && std::string_view("+-*/%~=<>|.,:()[]{}").find(c) == std::string::npos)
          error(line_, "unexpected character '" + op + "' inside a tag");
        if (c == '{') ++brace_depth;
        if (c == '}') --brace_depth;
        tokens_.push_back({Token::Kind::kOperator, op, line_});
        advance_to(pos_ + op.size());
      }
    }
  }

  void lex_string(char quote) {
    int line = line_;
    std::string value;
    size_t at = pos_ + 1;
    while (true) {
      if (at >= text_.size()) error(line, "string literal is never closed");
      char c = text_[at];
      if (c == quote) break;
      if (c != '\\') {
        value += c;
        ++at;
        continue;
      }
      if (at + 1 >= text_.size()) error(line, "string literal is never closed");
      char e = text_[at + 1];
      at += 2;
      switch (e) {
        case 'n':
          value += '\n';
          break;
        case 't':
          value += '\t';
          break;
        case 'r':
          value += '\r';
          break;
        case 'b':
          value += '\b';
          break;
        case 'f':
          value += '\f';
          break;
        case 'v':
          value += '\v';
          break;
        case '0':
          value += '\0';
          break;
        case '\\':
          value += '\\';
          break;
        case '\'':
          value += '\'';
          break;
        case '"':
          value += '"';
          break;
        case '\n':
          break;  // a backslash-newline continues the line
        case 'x':
        case 'u': {
          size_t digits = e == 'x' ? 2 : 4;
          uint32_t cp = 0;
          for (size_t i = 0; i < digits; ++i, ++at) {
            char h = at < text_.size() ? text_[at] : '\0';
            int d = is_digit(h)              ? h - '0'
                    : (h >= 'a' && h <= 'f') ? h - 'a' + 10
                    : (h >= 'A' && h <= 'F') ? h - 'A' + 10
                                             : -1;
            if (d < 0) error(line, std::string("bad \\") + e + " escape in a string literal");
            cp = cp * 16 + static_cast<uint32_t>(d);
          }
          // A lone surrogate has no UTF-8 spelling; Python could hold it but not output it.
          if (cp >= 0xD800 && cp <= 0xDFFF) error(line, "\\u escape of a lone surrogate");
          unicode::append_utf8(value, cp);
          break;
        }
        default:  // Python keeps unknown escapes as written
          value += '\\';
          value += e;
      }
    }
    tokens_.push_back({Token::Kind::kString, std::move(value), line});
    advance_to(at + 1);
  }

  void lex_number() {
    size_t end = pos_;
    while (end < text_.size() && (is_digit(text_[end]) || text_[end] == '_')) ++end;
    bool is_float = false;
    if (end + 1 < text_.size() && text_[end] == '.' && is_digit(text_[end + 1])) {
      is_float = true;
      ++end;
      while (end < text_.size() && is_digit(text_[end])) ++end;
    }
    std::string spelling;
    for (char c : text_.substr(pos_, end - pos_))
      if (c != '_') spelling += c;
    tokens_.push_back({is_float ? Token::Kind::kFloat : Token::Kind::kInteger, spelling, line_});
    advance_to(end);
  }

  std::string_view text_;
  const std::string& source_;
  std::vector<Token> tokens_;
  size_t pos_ = 0;
  int line_ = 1;
};

}  // namespace

size_t whitespace_length(std::string_view text, size_t at) {
  size_t next = at;
  char32_t cp = unicode::next_code_point(text, next);
  // The set @huggingface/jinja strips (JavaScript's trim): Unicode White_Space less U+0085,
  // plus U+FEFF.
  bool space = cp == ' ' || (cp >= 9 && cp <= 13) || cp == 0xA0 || cp == 0x1680 ||
               (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F ||
               cp == 0x205F || cp == 0x3000 || cp == 0xFEFF;
  return space ? next - at : 0;
}

std::vector<Token> tokenize(std::string_view source_text, const std::string& source) {
  return Lexer(source_text, source).run();
}

}  // namespace stoa::jinja
