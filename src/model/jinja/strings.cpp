#include "model/jinja/strings.h"

#include <algorithm>

#include "core/error.h"
#include "model/jinja/builtins.h"
#include "model/jinja/lexer.h"
#include "model/unicode.h"

namespace stoa::jinja {

size_t code_point_count(std::string_view s) {
  return static_cast<size_t>(std::count_if(
      s.begin(), s.end(), [](char c) { return (static_cast<unsigned char>(c) & 0xC0) != 0x80; }));
}

std::vector<std::string> split_code_points(std::string_view s) {
  std::vector<std::string> out;
  for (size_t i = 0; i < s.size();) {
    size_t start = i;
    unicode::next_code_point(s, i);
    out.emplace_back(s.substr(start, i - start));
  }
  return out;
}

std::string strip(std::string_view s, const Value& chars, bool left, bool right) {
  std::vector<std::string> pieces = split_code_points(s);
  std::vector<std::string> set;
  bool whitespace = chars.is_undefined() || chars.is_none();
  if (!whitespace) {
    STOA_CHECK(chars.is_string(), ErrorKind::kInvalidArgument,
               "strip expects a string of characters, got ", chars.type_name());
    set = split_code_points(chars.as_string());
  }
  auto strippable = [&](const std::string& c) {
    if (whitespace) return whitespace_length(c, 0) == c.size();
    return std::find(set.begin(), set.end(), c) != set.end();
  };
  size_t begin = 0, end = pieces.size();
  if (left)
    while (begin < end && strippable(pieces[begin])) ++begin;
  if (right)
    while (end > begin && strippable(pieces[end - 1])) --end;
  std::string out;
  for (size_t i = begin; i < end; ++i) out += pieces[i];
  return out;
}

std::string change_case(std::string_view s, std::string_view how) {
  std::string out(s);
  bool word_start = true;
  for (size_t i = 0; i < out.size(); ++i) {
    char& c = out[i];
    bool letter = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
    bool upper =
        how == "upper" || ((how == "title" && word_start) || (how == "capitalize" && i == 0));
    if (letter) c = upper ? static_cast<char>(std::toupper(c)) : static_cast<char>(std::tolower(c));
    word_start = !letter && !(c >= '0' && c <= '9');
  }
  return out;
}

std::string replace(std::string_view s, std::string_view old, std::string_view with,
                    int64_t count) {
  std::string out;
  size_t at = 0;
  int64_t done = 0;
  if (old.empty()) {
    // Python inserts `with` around every character.
    std::vector<std::string> chars = split_code_points(s);
    for (const std::string& c : chars) {
      if (count < 0 || done < count) {
        out += with;
        ++done;
      }
      out += c;
      check_string_size(out.size());
    }
    if (count < 0 || done < count) out += with;
    return out;
  }
  while (count < 0 || done < count) {
    size_t hit = s.find(old, at);
    if (hit == std::string_view::npos) break;
    out.append(s.substr(at, hit - at));
    out.append(with);
    check_string_size(out.size());
    at = hit + old.size();
    ++done;
  }
  out.append(s.substr(at));
  check_string_size(out.size());
  return out;
}

List split(std::string_view s, const Value& sep, int64_t maxsplit) {
  List out;
  if (sep.is_undefined() || sep.is_none()) {
    size_t i = 0;
    auto skip_space = [&] {
      while (i < s.size() && whitespace_length(s, i) > 0) i += whitespace_length(s, i);
    };
    skip_space();
    while (i < s.size()) {
      if (maxsplit >= 0 && static_cast<int64_t>(out.size()) == maxsplit) {
        std::string rest(s.substr(i));
        out.emplace_back(strip(rest, Value(), false, true));
        return out;
      }
      size_t start = i;
      while (i < s.size() && whitespace_length(s, i) == 0) unicode::next_code_point(s, i);
      out.emplace_back(std::string(s.substr(start, i - start)));
      check_list_size(out.size());
      skip_space();
    }
    return out;
  }
  STOA_CHECK(sep.is_string(), ErrorKind::kInvalidArgument, "split expects a string separator, got ",
             sep.type_name());
  const std::string& d = sep.as_string();
  STOA_CHECK(!d.empty(), ErrorKind::kInvalidArgument, "split: empty separator");
  size_t at = 0;
  while (maxsplit < 0 || static_cast<int64_t>(out.size()) < maxsplit) {
    size_t hit = s.find(d, at);
    if (hit == std::string_view::npos) break;
    out.emplace_back(std::string(s.substr(at, hit - at)));
    check_list_size(out.size());
    at = hit + d.size();
  }
  out.emplace_back(std::string(s.substr(at)));
  return out;
}

}  // namespace stoa::jinja
