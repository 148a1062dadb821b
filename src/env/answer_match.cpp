#include "env/answer_match.h"

#include <utf8proc.h>

#include <cstdint>

namespace stoa::env {
namespace {

// Decodes UTF-8 into code points, skipping malformed bytes one at a time.
std::vector<int32_t> decode_utf8(std::string_view text) {
  std::vector<int32_t> out;
  out.reserve(text.size());
  const auto* p = reinterpret_cast<const utf8proc_uint8_t*>(text.data());
  utf8proc_ssize_t left = static_cast<utf8proc_ssize_t>(text.size());
  while (left > 0) {
    utf8proc_int32_t cp = 0;
    utf8proc_ssize_t n = utf8proc_iterate(p, left, &cp);
    if (n <= 0) {  // malformed: drop one byte and resynchronise
      p += 1;
      left -= 1;
      continue;
    }
    out.push_back(cp);
    p += n;
    left -= n;
  }
  return out;
}

bool is_punctuation(int32_t cp) {
  // Python's string.punctuation contains ASCII symbols too ($+<=>^`|~), which Unicode files
  // under S* rather than P*; keep them so ASCII behaviour equals Search-R1's exactly.
  if (cp < 128) {
    return (cp >= 33 && cp <= 47) || (cp >= 58 && cp <= 64) || (cp >= 91 && cp <= 96) ||
           (cp >= 123 && cp <= 126);
  }
  switch (utf8proc_category(cp)) {
    case UTF8PROC_CATEGORY_PC:
    case UTF8PROC_CATEGORY_PD:
    case UTF8PROC_CATEGORY_PS:
    case UTF8PROC_CATEGORY_PE:
    case UTF8PROC_CATEGORY_PI:
    case UTF8PROC_CATEGORY_PF:
    case UTF8PROC_CATEGORY_PO:
      return true;
    default:
      return false;
  }
}

bool is_space(int32_t cp) {
  if (cp == ' ' || (cp >= 9 && cp <= 13) || cp == 0x1c || cp == 0x1d || cp == 0x1e || cp == 0x1f ||
      cp == 0x85)
    return true;
  auto cat = utf8proc_category(cp);
  return cat == UTF8PROC_CATEGORY_ZS || cat == UTF8PROC_CATEGORY_ZL || cat == UTF8PROC_CATEGORY_ZP;
}

// Python's \w for str patterns: alphanumerics (letters, marks, digits) and the underscore.
bool is_word(int32_t cp) {
  if (cp == '_') return true;
  switch (utf8proc_category(cp)) {
    case UTF8PROC_CATEGORY_LU:
    case UTF8PROC_CATEGORY_LL:
    case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM:
    case UTF8PROC_CATEGORY_LO:
    case UTF8PROC_CATEGORY_ND:
    case UTF8PROC_CATEGORY_NL:
    case UTF8PROC_CATEGORY_NO:
    case UTF8PROC_CATEGORY_MN:
    case UTF8PROC_CATEGORY_MC:
    case UTF8PROC_CATEGORY_ME:
      return true;
    default:
      return false;
  }
}

bool is_article(const std::vector<int32_t>& cps, size_t begin, size_t end) {
  size_t n = end - begin;
  if (n == 1) return cps[begin] == 'a';
  if (n == 2) return cps[begin] == 'a' && cps[begin + 1] == 'n';
  if (n == 3) return cps[begin] == 't' && cps[begin + 1] == 'h' && cps[begin + 2] == 'e';
  return false;
}

void append_utf8(std::string& out, int32_t cp) {
  utf8proc_uint8_t buf[4];
  utf8proc_ssize_t n = utf8proc_encode_char(cp, buf);
  out.append(reinterpret_cast<const char*>(buf), static_cast<size_t>(n));
}

}  // namespace

std::string normalize_answer(std::string_view text) {
  // Same order as Search-R1: lower -> remove punctuation -> remove articles -> fix whitespace.
  std::vector<int32_t> cps;
  for (int32_t cp : decode_utf8(text)) {
    int32_t lower = utf8proc_tolower(cp);
    if (!is_punctuation(lower)) cps.push_back(lower);
  }
  // re.sub(r"\b(a|an|the)\b", " ", s): a maximal run of word characters equal to an article is
  // replaced by a space.
  std::vector<int32_t> no_articles;
  no_articles.reserve(cps.size());
  for (size_t i = 0; i < cps.size();) {
    if (!is_word(cps[i])) {
      no_articles.push_back(cps[i++]);
      continue;
    }
    size_t j = i;
    while (j < cps.size() && is_word(cps[j])) ++j;
    if (is_article(cps, i, j)) {
      no_articles.push_back(' ');
    } else {
      no_articles.insert(no_articles.end(), cps.begin() + i, cps.begin() + j);
    }
    i = j;
  }
  // " ".join(s.split())
  std::string out;
  bool pending_space = false;
  for (int32_t cp : no_articles) {
    if (is_space(cp)) {
      pending_space = !out.empty();
      continue;
    }
    if (pending_space) out.push_back(' ');
    pending_space = false;
    append_utf8(out, cp);
  }
  return out;
}

bool exact_match(std::string_view prediction, const std::vector<std::string>& golden_answers) {
  std::string pred = normalize_answer(prediction);
  for (const auto& golden : golden_answers) {
    if (normalize_answer(golden) == pred) return true;
  }
  return false;
}

}  // namespace stoa::env
