// Unicode helpers for the tokenizer: UTF-8 validation and repair, normalisation forms (via
// utf8proc), the White_Space property, and GPT-2's byte <-> printable-character mapping that
// byte-level BPE uses to spell arbitrary bytes as vocabulary strings.
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace stoa::unicode {

// Decodes the code point at text[i] and advances i. Precondition: text is valid UTF-8.
char32_t next_code_point(std::string_view text, size_t& i);
void append_utf8(std::string& out, char32_t cp);

// True when text is well-formed UTF-8 (no overlongs, surrogates or code points > U+10FFFF).
bool is_valid_utf8(std::string_view text);

// Replaces every maximal ill-formed subsequence with U+FFFD, exactly as the WHATWG/Unicode
// "substitution of maximal subparts" rule (what TextDecoder, Rust's from_utf8_lossy and Python's
// errors="replace" do), so a lossy string decodes identically to the JS oracle.
std::string to_valid_utf8(std::string_view bytes);

enum class NormalForm { kNFC, kNFD, kNFKC, kNFKD };
// Normalises valid UTF-8 text. Fast path: text whose code points are all below U+0300 is already
// in NFC (nothing there composes), which covers ASCII and Latin-1 prose without calling utf8proc.
std::string normalize(std::string_view text, NormalForm form);

// The Unicode White_Space property (what the JS oracle and Oniguruma mean by \s).
bool is_white_space(char32_t cp);

// GPT-2's bytes_to_unicode(): byte b -> a printable code point (b itself for printable Latin-1,
// else 256 + n). byte_to_char() is that code point; char_to_byte() inverts it (-1 if not a byte).
char32_t byte_to_char(uint8_t b);
int char_to_byte(char32_t cp);
// The UTF-8 spelling of byte_to_char(b), precomputed for all 256 bytes.
const std::array<std::string, 256>& byte_level_strings();

}  // namespace stoa::unicode
