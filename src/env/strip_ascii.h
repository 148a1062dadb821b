// Python's str.strip() for the ASCII whitespace the data formats and protocols use: JSONL loaders
// reject blank questions with it and task protocols strip tag contents with it.
#pragma once
#include <string_view>

namespace stoa::env {

inline std::string_view strip_ascii(std::string_view text) {
  auto is_ws = [](char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
  };
  while (!text.empty() && is_ws(text.front())) text.remove_prefix(1);
  while (!text.empty() && is_ws(text.back())) text.remove_suffix(1);
  return text;
}

}  // namespace stoa::env
