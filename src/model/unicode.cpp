#include "model/unicode.h"

#include <cstdlib>
#include <memory>

#include <utf8proc.h>

#include "core/error.h"

namespace stoa::unicode {

char32_t next_code_point(std::string_view text, size_t& i) {
  auto b = static_cast<uint8_t>(text[i]);
  if (b < 0x80) {
    ++i;
    return b;
  }
  int extra = b >= 0xF0 ? 3 : b >= 0xE0 ? 2 : 1;
  char32_t cp = b & (0x3F >> extra);
  for (int k = 1; k <= extra && i + k < text.size(); ++k) {
    cp = (cp << 6) | (static_cast<uint8_t>(text[i + k]) & 0x3F);
  }
  i += extra + 1;
  return cp;
}

void append_utf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

namespace {

// Length of the well-formed sequence at text[i], or -(bytes in its maximal ill-formed subpart).
// Table 3-7 of the Unicode standard: the second byte's range depends on the lead byte.
int sequence_length(std::string_view text, size_t i) {
  auto b = static_cast<uint8_t>(text[i]);
  if (b < 0x80) return 1;
  int need;
  uint8_t lo = 0x80, hi = 0xBF;
  if (b >= 0xC2 && b <= 0xDF) {
    need = 1;
  } else if (b >= 0xE0 && b <= 0xEF) {
    need = 2;
    if (b == 0xE0) lo = 0xA0;
    if (b == 0xED) hi = 0x9F;  // no UTF-16 surrogates
  } else if (b >= 0xF0 && b <= 0xF4) {
    need = 3;
    if (b == 0xF0) lo = 0x90;
    if (b == 0xF4) hi = 0x8F;  // nothing above U+10FFFF
  } else {
    return -1;  // a stray continuation byte, C0/C1 (always overlong) or F5..FF
  }
  for (int k = 1; k <= need; ++k) {
    if (i + k >= text.size()) return -k;
    auto c = static_cast<uint8_t>(text[i + k]);
    if (c < lo || c > hi) return -k;
    lo = 0x80;
    hi = 0xBF;
  }
  return need + 1;
}

}  // namespace

bool is_valid_utf8(std::string_view text) {
  for (size_t i = 0; i < text.size();) {
    if (static_cast<uint8_t>(text[i]) < 0x80) {
      ++i;
      continue;
    }
    int n = sequence_length(text, i);
    if (n < 0) return false;
    i += n;
  }
  return true;
}

std::string to_valid_utf8(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  for (size_t i = 0; i < bytes.size();) {
    int n = sequence_length(bytes, i);
    if (n > 0) {
      out.append(bytes.substr(i, n));
      i += n;
    } else {
      out.append("\xEF\xBF\xBD");  // U+FFFD for the whole maximal subpart
      i += -n;
    }
  }
  return out;
}

namespace {

std::string utf8proc_normalize(std::string_view text, NormalForm form) {
  int options = UTF8PROC_STABLE;
  switch (form) {
    case NormalForm::kNFC:
      options |= UTF8PROC_COMPOSE;
      break;
    case NormalForm::kNFD:
      options |= UTF8PROC_DECOMPOSE;
      break;
    case NormalForm::kNFKC:
      options |= UTF8PROC_COMPOSE | UTF8PROC_COMPAT;
      break;
    case NormalForm::kNFKD:
      options |= UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT;
      break;
  }
  utf8proc_uint8_t* result = nullptr;
  utf8proc_ssize_t n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(text.data()),
                                    static_cast<utf8proc_ssize_t>(text.size()), &result,
                                    static_cast<utf8proc_option_t>(options));
  std::unique_ptr<utf8proc_uint8_t, decltype(&std::free)> owned(result, &std::free);
  if (n < 0) {
    fail(ErrorKind::kInvalidArgument, "Unicode normalisation failed: ", utf8proc_errmsg(n));
  }
  return std::string(reinterpret_cast<const char*>(result), static_cast<size_t>(n));
}

}  // namespace

std::string normalize(std::string_view text, NormalForm form) {
  if (form != NormalForm::kNFC) {
    bool ascii = true;
    for (char c : text) ascii = ascii && static_cast<uint8_t>(c) < 0x80;
    return ascii ? std::string(text) : utf8proc_normalize(text, form);
  }
  // NFC is local: a code point below U+0300 is a starter that composes with nothing before it
  // and is reordered with nothing, so NFC(x + y) = NFC(x) + NFC(y) whenever y starts with one.
  // Only the runs around code points >= U+0300 (plus the starter before each) need utf8proc;
  // ASCII and Latin-1 text is copied as is.
  std::string out;
  size_t copied = 0;    // text[0, copied) is in `out`
  size_t last_low = 0;  // start of the last code point < U+0300 seen
  bool have_low = false;
  for (size_t i = 0; i < text.size();) {
    if (static_cast<uint8_t>(text[i]) < 0xCC) {  // U+0300 is CC 80: below that, a low code point
      last_low = i;
      have_low = true;
      i += static_cast<uint8_t>(text[i]) < 0x80 ? 1 : 2;
      continue;
    }
    // A run of code points >= U+0300 starts at i; it extends to the next low code point.
    size_t run_begin = have_low ? last_low : i;
    size_t j = i;
    while (j < text.size() && static_cast<uint8_t>(text[j]) >= 0xCC) next_code_point(text, j);
    if (out.empty() && copied == 0) out.reserve(text.size() + 16);
    out.append(text.substr(copied, run_begin - copied));
    out += utf8proc_normalize(text.substr(run_begin, j - run_begin), form);
    copied = j;
    have_low = false;
    i = j;
  }
  if (copied == 0) return std::string(text);
  out.append(text.substr(copied));
  return out;
}

bool is_white_space(char32_t cp) {
  if (cp <= 0x20) return cp == 0x20 || (cp >= 0x09 && cp <= 0x0D);
  if (cp < 0x85) return false;
  return cp == 0x85 || cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) ||
         cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

namespace {

struct ByteTables {
  std::array<char32_t, 256> to_char{};
  std::array<std::string, 256> strings;
  std::array<int16_t, 324> to_byte{};  // every mapped code point is below 256 + 68
  ByteTables() {
    to_byte.fill(-1);
    int n = 0;
    for (int b = 0; b < 256; ++b) {
      bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
      to_char[b] = printable ? static_cast<char32_t>(b) : static_cast<char32_t>(256 + n++);
      to_byte[to_char[b]] = static_cast<int16_t>(b);
      append_utf8(strings[b], to_char[b]);
    }
  }
};

const ByteTables& byte_tables() {
  static const ByteTables tables;
  return tables;
}

}  // namespace

char32_t byte_to_char(uint8_t b) {
  return byte_tables().to_char[b];
}

int char_to_byte(char32_t cp) {
  const auto& t = byte_tables();
  return cp < t.to_byte.size() ? t.to_byte[cp] : -1;
}

const std::array<std::string, 256>& byte_level_strings() {
  return byte_tables().strings;
}

}  // namespace stoa::unicode
