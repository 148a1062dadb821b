// The deterministic oracle corpus: hand-picked hard cases from every script and whitespace class
// the pre-tokenizer regex distinguishes, plus seeded random mixes of fragments and a few very long
// strings. Only characters assigned before Unicode 14 are used, so the Unicode tables of PCRE2
// (10.42), utf8proc (2.8) and Node's ICU agree on every property the regex asks about.
#pragma once
#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace stoa::test {

inline const std::vector<std::string>& oracle_fragments() {
  static const std::vector<std::string> fragments = {
      // ASCII prose, contractions in every case the (?i:...) group sees.
      "The quick brown fox jumps over the lazy dog.",
      "It's",
      "it'S",
      "we're",
      "WE'RE",
      "they've",
      "I'm",
      "you'll",
      "he'd",
      "don't",
      "O'Neil's",
      "'s",
      "'tis",
      "rock'n'roll",
      " Hello, world!",
      "Hello   world",
      "e.g. i.e. etc.",
      "\"quoted\"",
      "(parens) [brackets]",
      "{braces}",
      "a-b_c",
      "snake_case_name",
      "CamelCaseWord",
      "URL: https://example.org/a?b=c&d=e",
      "email@example.com",
      "#hashtag @mention",
      "100%",
      "$9.99",
      "~/path/to/file.txt",
      // Code.
      "int main(int argc, char** argv) {\n  return 0;\n}\n",
      "def f(x):\n\treturn x ** 2\n",
      "for (i = 0; i < n; ++i) { a[i] += b[i]; }",
      "    if x:\n        pass\n",
      "{\"key\": [1, 2.5e-3, null, true]}",
      "x = y != z && w <= v || !u;",
      "/* comment */ // line",
      "<div class=\"a\">text</div>",
      "SELECT * FROM t WHERE id = 42;",
      "#include <vector>",
      "lambda: None",
      "```python\nprint('hi')\n```",
      "a\\b\\c",
      "0x1F 0b1010 1e10 3.14159",
      // Digits.
      "1234567890",
      "3.14",
      "1,000,000",
      "2024-06-01",
      "12:34:56",
      "-42",
      "+7",
      "1/2",
      "00000000000000000000",
      "98765432109876543210987654321",
      "v1.2.3",
      "A1B2C3",
      "\u0661\u0662\u0663",
      "\u0967\u0968\u0969",
      "\uFF11\uFF12",
      "\u00B2\u00B3\u00BD",
      // Whitespace: runs, tabs, CR/LF mixes, Unicode spaces.
      " ",
      "  ",
      "    ",
      "\t",
      "\t\t",
      " \t ",
      "\n",
      "\n\n",
      "\r\n",
      "\r\n\r\n",
      "\r",
      "\n\r",
      " \n",
      "  \n  ",
      "\n \n",
      "word \n",
      "word  ",
      "  word",
      "\u00A0",
      "a\u00A0b",
      "\u3000",
      "\u2028",
      "\u2029",
      "\u0085",
      "\u2003\u2003",
      "\u200B",
      "\v",
      "\f",
      " \r\n\t ",
      "line1\nline2\r\nline3\rline4",
      "trailing   \n\n   ",
      "\t\tindented\n\t\t\tmore",
      // Accented letters: precomposed and decomposed (NFC composes), singletons, Hangul jamo.
      "caf\u00E9",
      "cafe\u0301",
      "na\u00EFve",
      "nai\u0308ve",
      "A\u030A",
      "\u212B",
      "\u2126",
      "\u00C5ngstr\u00F6m",
      "Ame\u0301lie",
      "e\u0301\u0301",
      "o\u0308\u0304",
      "\u0301start",
      "\u1100\u1161\u11A8",
      "\uAC00",
      "\u1E9B\u0323",
      "\uFB01ne",
      "Stra\u00DFe",
      "\u0130stanbul",
      "\u00C7a va",
      "\u0141\u00F3d\u017A",
      "\u0103\u0219\u021B",
      "\u1EA0\u1EA1\u1EC7",
      // Greek, Cyrillic, Armenian, Hebrew, Arabic, Devanagari, Bengali, Thai, Georgian.
      "\u039A\u03B1\u03BB\u03B7\u03BC\u03AD\u03C1\u03B1",
      "\u041F\u0440\u0438\u0432\u0435\u0442",
      "\u0532\u0561\u0580\u0587",
      "\u05E9\u05DC\u05D5\u05DD",
      "\u05D0\u05B8\u05D1",
      "\u0645\u0631\u062D\u0628\u0627 \u0628\u0627\u0644\u0639\u0627\u0644\u0645",
      "\u0627\u0644\u0633\u0644\u0627\u0645 \u0639\u0644\u064A\u0643\u0645",
      "\u0646\u064E\u0635\u0651",
      "\u0928\u092E\u0938\u094D\u0924\u0947",
      "\u0939\u093F\u0928\u094D\u0926\u0940",
      "\u0915\u094D\u0937",
      "\u09AC\u09BE\u0982\u09B2\u09BE",
      "\u0E2A\u0E27\u0E31\u0E2A\u0E14\u0E35",
      "\u10D2\u10D0\u10DB\u10D0\u10E0\u10EF\u10DD\u10D1\u10D0",
      // CJK.
      "\u4F60\u597D\u4E16\u754C",
      "\u6211\u7231\u5317\u4EAC\u5929\u5B89\u95E8",
      "\u3053\u3093\u306B\u3061\u306F",
      "\u30AB\u30BF\u30AB\u30CA",
      "\u65E5\u672C\u8A9E\u306E\u6587",
      "\uC548\uB155\uD558\uC138\uC694",
      "\u4E2D\u6587\uFF0C\u6807\u70B9\u3002",
      "\u300C\u5F15\u7528\u300D",
      "\uFF21\uFF22\uFF23",
      "\u20000\u2A6D6",
      "\U00020000\U0002A6D6",
      // Emoji: ZWJ sequences, skin tones, flags, keycaps, variation selectors.
      "\U0001F600",
      "\U0001F44D\U0001F3FD",
      "\U0001F468\u200D\U0001F469\u200D\U0001F467",
      "\U0001F469\U0001F3FE\u200D\U0001F4BB",
      "\U0001F1FA\U0001F1F8",
      "\U0001F1EF\U0001F1F5",
      "1\uFE0F\u20E3",
      "\u2764\uFE0F",
      "\u263A\uFE0E",
      "\U0001F3F3\uFE0F\u200D\U0001F308",
      "\U0001F9D1\u200D\U0001F91D\u200D\U0001F9D1",
      "hi\U0001F600there",
      "\U0001F525\U0001F525",
      // Special and added tokens, whole, adjacent and broken.
      "<|im_start|>",
      "<|im_end|>",
      "<|endoftext|>",
      "<|im_start|>user\n",
      "<|im_end|>\n",
      "<|im_start|>assistant\n<think>\n\n</think>\n\n",
      "<think>",
      "</think>",
      "<tool_call>",
      "</tool_call>",
      "<|im_start|><|im_end|>",
      "<|im_start",
      "im_end|>",
      "<|im_end|",
      "<|",
      "|>",
      "<<|im_end|>>",
      "<|endoftext|><|endoftext|>",
      "<search>",
      "</answer>",
      "<|vision_start|><|image_pad|><|vision_end|>",
      "<|fim_prefix|>",
      "<|box_start|>x",
      // Invalid-looking but valid text.
      "\uFFFD",
      "\uFFFD\uFFFD",
      "\uFEFF",
      "\uFEFFBOM",
      "\u0001\u0002\u001F",
      "\u007F",
      "\u0080\u009F",
      "\uE000",
      "\U000F0000",
      "\uFFFF",
      "\uFDD0",
      "\U0001D400\U0001D401",
      "'\u017F",
      "'\u212A",
      "\u2019s",
      "\u02BC",
      "\u00AD",
      "\u200D",
      "\u200E\u200F",
      "\u0300\u0301\u0302",
      "a\u0308\u0308\u0308\u0308\u0308",
      "\u2060",
      "\u034F",
  };
  return fragments;
}

// Deterministic (std::mt19937 is fully specified; no distribution objects, whose output is
// implementation-defined).
inline std::vector<std::string> oracle_corpus(uint32_t seed = 20240601, size_t random_mixes = 420) {
  const auto& frags = oracle_fragments();
  std::vector<std::string> corpus;
  corpus.push_back("");
  for (const std::string& f : frags) corpus.push_back(f);
  std::mt19937 rng(seed);
  const char* joiners[] = {"", " ", "  ", "\n", "\t", "\r\n", ", ", ". ", " \n "};
  for (size_t i = 0; i < random_mixes; ++i) {
    std::string s;
    size_t parts = 1 + rng() % 8;
    for (size_t k = 0; k < parts; ++k) {
      s += frags[rng() % frags.size()];
      s += joiners[rng() % (sizeof joiners / sizeof *joiners)];
    }
    corpus.push_back(s);
  }
  // Very long strings: one long mix, long runs of one class each.
  std::string mix;
  while (mix.size() < 60000) {
    mix += frags[rng() % frags.size()];
    mix += joiners[rng() % (sizeof joiners / sizeof *joiners)];
  }
  corpus.push_back(mix);
  corpus.push_back(std::string(5000, 'a'));
  corpus.push_back(std::string(3000, '7'));
  corpus.push_back(std::string(2000, ' '));
  corpus.push_back(std::string(1000, '\n'));
  corpus.push_back(std::string(1500, ' ') + "x" + std::string(1500, '\t'));
  std::string cjk;
  for (int i = 0; i < 3000; ++i) cjk += "\u4F60\u597D";
  corpus.push_back(cjk);
  std::string emoji;
  for (int i = 0; i < 500; ++i)
    emoji += "\U0001F468\u200D\U0001F469\u200D\U0001F467\U0001F44D\U0001F3FD";
  corpus.push_back(emoji);
  std::string punct;
  for (int i = 0; i < 2000; ++i) punct += "!?.,;:"[i % 6];
  corpus.push_back(punct);
  corpus.push_back(std::string("nul\0byte\0", 10));
  return corpus;
}

}  // namespace stoa::test
