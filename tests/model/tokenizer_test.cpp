// Unit tests of the byte-level BPE tokenizer on hand-built tiny vocabularies.
#include <deque>
#include <random>
#include <thread>

#include <gtest/gtest.h>
#include <utf8proc.h>

#include "core/error.h"
#include "model/pretokenizer.h"
#include "model/tiny_tokenizer.h"
#include "model/tokenizer.h"
#include "model/tokenizer_bpe.h"
#include "model/unicode.h"

namespace stoa {
namespace {

using test::added_token;
using test::tiny_tokenizer_json;
using test::TinySpec;

Tokenizer make(const TinySpec& spec) {
  return Tokenizer::from_json(tiny_tokenizer_json(spec).dump(), "tiny.json");
}

std::vector<int32_t> ids(std::initializer_list<int32_t> list) {
  return list;
}

TEST(Tokenizer, BytesWithoutMergesAreByteIds) {
  Tokenizer tok = make({});
  EXPECT_EQ(tok.encode("ab"), ids({'a', 'b'}));
  EXPECT_EQ(tok.vocab_size(), 256);
  EXPECT_EQ(tok.token_text(' '), "\xC4\xA0");  // "Ġ"
  EXPECT_EQ(tok.encode(""), ids({}));
}

TEST(Tokenizer, MergesApplyByRank) {
  TinySpec spec;
  spec.merges = {{"a", "b"}, {"b", "c"}};  // ab=256 (rank 0), bc=257 (rank 1)
  EXPECT_EQ(make(spec).encode("abc"), ids({256, 'c'}));
  spec.merges = {{"b", "c"}, {"a", "b"}};  // now bc=256 has the lower rank
  EXPECT_EQ(make(spec).encode("abc"), ids({'a', 256}));
}

TEST(Tokenizer, MergesChainAndTiesGoLeftmost) {
  TinySpec spec;
  spec.merges = {{"a", "a"}, {"aa", "aa"}};  // aa=256, aaaa=257
  Tokenizer tok = make(spec);
  EXPECT_EQ(tok.encode("aaa"), ids({256, 'a'}));
  EXPECT_EQ(tok.encode("aaaa"), ids({257}));
  EXPECT_EQ(tok.encode("aaaaa"), ids({257, 'a'}));
}

TEST(Tokenizer, LegacyAndPairMergeFormatsAgree) {
  TinySpec spec;
  spec.merges = {{"h", "e"}, {"l", "l"}, {"he", "ll"}, {"hell", "o"}, {" ", "w"}};
  Tokenizer pairs = make(spec);
  spec.legacy_merges = true;
  Tokenizer legacy = make(spec);
  for (const char* text : {"hello world", "hellohello", "well hello"}) {
    EXPECT_EQ(pairs.encode(text), legacy.encode(text)) << text;
  }
  EXPECT_EQ(pairs.encode("hello"), ids({259}));
}

TEST(Tokenizer, PreTokenizerKeepsMergesInsidePieces) {
  TinySpec spec;
  spec.merges = {{"a", " "}};  // "a " would merge, but the regex cuts "a" from " b"
  EXPECT_EQ(make(spec).encode("a b"), ids({'a', ' ', 'b'}));
}

TEST(Tokenizer, SpecialTokensSplitBeforeBpeLongestMatch) {
  TinySpec spec;
  spec.merges = {{"<", "a"}};
  spec.added = {added_token("<a>", true), added_token("<a>>", true), added_token("<b>", false)};
  Tokenizer tok = make(spec);  // <a>=257, <a>>=258, <b>=259
  EXPECT_EQ(tok.encode("x<a>y"), ids({'x', 257, 'y'}));
  EXPECT_EQ(tok.encode("<a>>"), ids({258}));
  EXPECT_EQ(tok.encode("<a"), ids({256}));
  EXPECT_EQ(tok.encode("<b><a><b>"), ids({259, 257, 259}));
  EXPECT_TRUE(tok.is_special(257));
  EXPECT_FALSE(tok.is_special(259));
  EXPECT_EQ(tok.token_id("<a>>"), 258);
  EXPECT_EQ(tok.token_id("<zz>"), std::nullopt);
  std::vector<int32_t> encoded = tok.encode("hi<a>there<b>");
  EXPECT_EQ(tok.decode(encoded), "hi<a>there<b>");
  EXPECT_EQ(tok.decode(encoded, /*skip_special_tokens=*/true), "hithere<b>");
}

TEST(Tokenizer, AddedTokenStripsWhitespace) {
  TinySpec spec;
  spec.added = {added_token("<m>", true, /*lstrip=*/true, /*rstrip=*/true)};
  Tokenizer tok = make(spec);  // <m>=256
  EXPECT_EQ(tok.encode("a  <m>\t b"), ids({'a', 256, 'b'}));
}

TEST(Tokenizer, AddSpecialTokensUsesTemplate) {
  TinySpec spec;
  spec.added = {added_token("<s>", true), added_token("</s>", true)};
  spec.post_processor = {{"type", "TemplateProcessing"},
                         {"single",
                          {{{"SpecialToken", {{"id", "<s>"}, {"type_id", 0}}}},
                           {{"Sequence", {{"id", "A"}, {"type_id", 0}}}},
                           {{"SpecialToken", {{"id", "</s>"}, {"type_id", 0}}}}}},
                         {"pair", nlohmann::json::array()},
                         {"special_tokens", nlohmann::json::object()}};
  Tokenizer tok = make(spec);
  EXPECT_EQ(tok.encode("x", true), ids({256, 'x', 257}));
  EXPECT_EQ(tok.encode("x", false), ids({'x'}));
}

TEST(Tokenizer, NfcNormalisesDecomposedInput) {
  Tokenizer tok = make({});
  // "e" + COMBINING ACUTE -> U+00E9, encoded as its two UTF-8 bytes C3 A9.
  EXPECT_EQ(tok.encode("e\xCC\x81"), ids({0xC3, 0xA9}));
}

TEST(Tokenizer, InvalidUtf8BecomesReplacementCharacter) {
  Tokenizer tok = make({});
  // Each maximal ill-formed subpart becomes one U+FFFD (EF BF BD): FF, then E4 B8 (truncated).
  EXPECT_EQ(tok.encode("\xFF"
                       "a\xE4\xB8"),
            tok.encode("\xEF\xBF\xBD"
                       "a\xEF\xBF\xBD"));
  std::mt19937 rng(7);
  for (int i = 0; i < 200; ++i) {
    std::string junk(rng() % 40, '\0');
    for (char& c : junk) c = static_cast<char>(rng());
    std::vector<int32_t> encoded = tok.encode(junk);
    EXPECT_EQ(tok.decode(encoded),
              unicode::normalize(unicode::to_valid_utf8(junk), unicode::NormalForm::kNFC));
  }
}

TEST(Tokenizer, DecodeRepairsPartialCharactersButDecodeBytesKeepsThem) {
  Tokenizer tok = make({});
  std::vector<int32_t> half = {0xE4, 0xB8};  // the first two bytes of U+4E16
  EXPECT_EQ(tok.decode(half), "\xEF\xBF\xBD");
  EXPECT_EQ(tok.decode_bytes(half), "\xE4\xB8");
  EXPECT_EQ(tok.decode(ids({0xE4, 0xB8, 0x96})), "\xE4\xB8\x96");
  EXPECT_THROW(tok.decode(ids({256})), Error);
  EXPECT_THROW(tok.decode(ids({-1})), Error);
}

TEST(Tokenizer, RoundTripsArbitraryValidText) {
  TinySpec spec;
  spec.merges = {{"t", "h"}, {"th", "e"}, {" ", "the"}, {"\xE4", "\xB8"}};
  spec.added = {added_token("<|im_end|>", true)};
  Tokenizer tok = make(spec);
  for (const char* text : {"the theme\n\n\tthe", "\xE4\xB8\x96\xE7\x95\x8C", "a<|im_end|>b",
                           "emoji \xF0\x9F\x91\x8D\xF0\x9F\x8F\xBD", "  \r\n  "}) {
    EXPECT_EQ(tok.decode(tok.encode(text)), text);
  }
}

TEST(Tokenizer, ConcurrentEncodeMatchesSerial) {
  TinySpec spec;
  spec.merges = {{"a", "b"}, {"ab", "c"}, {" ", "ab"}, {"c", "c"}};
  Tokenizer tok = make(spec);
  std::vector<std::string> texts;
  std::mt19937 rng(1);
  for (int i = 0; i < 300; ++i) {
    std::string t;
    for (int k = 0; k < 30; ++k) t += "abc "[rng() % 4];
    texts.push_back(t);
  }
  std::vector<std::vector<int32_t>> expected;
  for (const auto& t : texts) expected.push_back(tok.encode(t));
  std::vector<std::thread> threads;
  std::atomic<int> mismatches{0};
  for (int th = 0; th < 4; ++th) {
    threads.emplace_back([&, th] {
      Tokenizer copy = tok;  // handles share state
      for (int round = 0; round < 20; ++round)
        for (size_t i = th; i < texts.size(); i += 2)
          if (copy.encode(texts[i]) != expected[i]) ++mismatches;
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(mismatches.load(), 0);
}

TEST(Bpe, ScanAndHeapAgree) {
  std::mt19937 rng(3);
  for (int trial = 0; trial < 50; ++trial) {
    MergeTable table;
    int next_id = 4;
    std::vector<int32_t> symbols_seen = {0, 1, 2, 3};
    for (int r = 0; r < 30; ++r) {
      int32_t a = symbols_seen[rng() % symbols_seen.size()];
      int32_t b = symbols_seen[rng() % symbols_seen.size()];
      if (table.insert(a, b, {r, next_id})) symbols_seen.push_back(next_id++);
    }
    for (int n : {2, 5, 17, 60, 300}) {
      std::vector<int32_t> word(n);
      for (auto& s : word) s = static_cast<int32_t>(rng() % 4);
      std::vector<int32_t> scan = word, heap = word;
      bpe_merge_scan(scan, table);
      bpe_merge_heap(heap, table);
      ASSERT_EQ(scan, heap) << "trial " << trial << " n " << n;
    }
  }
}

TEST(Bpe, LongPieceUsesHeapPathCorrectly) {
  TinySpec spec;
  spec.merges = {{"a", "a"}, {"aa", "aa"}};
  Tokenizer tok = make(spec);
  std::vector<int32_t> encoded = tok.encode(std::string(101, 'a'));
  std::vector<int32_t> expected(25, 257);
  expected.push_back('a');
  EXPECT_EQ(encoded, expected);
}

TEST(Unicode, RepairFollowsMaximalSubpartRule) {
  using unicode::to_valid_utf8;
  const std::string r = "\xEF\xBF\xBD";
  EXPECT_EQ(to_valid_utf8("\xC0\xAF"), r + r);                  // overlong: two subparts
  EXPECT_EQ(to_valid_utf8("\xED\xA0\x80"), r + r + r);          // surrogate
  EXPECT_EQ(to_valid_utf8("\xF0\x9F\x98"), r);                  // truncated 4-byte sequence
  EXPECT_EQ(to_valid_utf8("\xF4\x90\x80\x80"), r + r + r + r);  // above U+10FFFF
  EXPECT_EQ(to_valid_utf8("ok\xE2\x82\xAC"), "ok\xE2\x82\xAC");
  EXPECT_TRUE(unicode::is_valid_utf8("\xF0\x9F\x98\x80"));
  EXPECT_FALSE(unicode::is_valid_utf8("\xF0\x9F\x98"));
}

TEST(Unicode, PiecewiseNfcEqualsWholeStringNfc) {
  // Our NFC sends only the runs around code points >= U+0300 to utf8proc; it must equal
  // utf8proc on the whole string. Random mixes of starters, combining marks, jamo, CJK.
  const char32_t alphabet[] = {
      U'a',      U'e',      U'A',      U' ',      U'\n',     U'\u00E9',     U'\u00C5', U'\u0301',
      U'\u0308', U'\u0323', U'\u0304', U'\u1100', U'\u1161', U'\u11A8',     U'\uAC00', U'\u4E16',
      U'\u212B', U'\u0915', U'\u093C', U'\u094D', U'\u0F73', U'\U0001F600', U'\u02FF', U'\u0300'};
  std::mt19937 rng(17);
  for (int trial = 0; trial < 3000; ++trial) {
    std::string s;
    for (int k = 0, n = static_cast<int>(rng() % 12); k < n; ++k)
      unicode::append_utf8(s, alphabet[rng() % std::size(alphabet)]);
    utf8proc_uint8_t* whole = utf8proc_NFC(reinterpret_cast<const utf8proc_uint8_t*>(s.c_str()));
    std::string expected(reinterpret_cast<char*>(whole));
    std::free(whole);
    ASSERT_EQ(unicode::normalize(s, unicode::NormalForm::kNFC), expected) << s;
  }
}

TEST(Unicode, ByteMapIsGpt2s) {
  EXPECT_EQ(unicode::byte_to_char('A'), U'A');
  EXPECT_EQ(unicode::byte_to_char(' '), U'\u0120');
  EXPECT_EQ(unicode::byte_to_char('\n'), U'\u010A');
  for (int b = 0; b < 256; ++b) EXPECT_EQ(unicode::char_to_byte(unicode::byte_to_char(b)), b);
}

// The Rust crate's documented example for SplitDelimiterBehavior on "the-final--countdown".
TEST(PreTokenizer, SplitBehaviorsFollowTheRustCrate) {
  auto pieces_for = [](const std::string& behavior) {
    nlohmann::json spec = {
        {"type", "Sequence"},
        {"pretokenizers",
         {{{"type", "Split"}, {"pattern", {{"String", "-"}}}, {"behavior", behavior}},
          {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}}}};
    PreTokenizer pt = PreTokenizer::from_json(spec, "split.json");
    std::vector<std::string_view> views;
    std::deque<std::string> arena;
    pt.split("the-final--countdown", views, arena);
    return std::vector<std::string>(views.begin(), views.end());
  };
  using V = std::vector<std::string>;
  EXPECT_EQ(pieces_for("Removed"), (V{"the", "final", "countdown"}));
  EXPECT_EQ(pieces_for("Isolated"), (V{"the", "-", "final", "-", "-", "countdown"}));
  EXPECT_EQ(pieces_for("MergedWithPrevious"), (V{"the-", "final-", "-", "countdown"}));
  EXPECT_EQ(pieces_for("MergedWithNext"), (V{"the", "-final", "-", "-countdown"}));
  EXPECT_EQ(pieces_for("Contiguous"), (V{"the", "-", "final", "--", "countdown"}));
}

TEST(PreTokenizer, ByteLevelRegexAndPrefixSpace) {
  auto pieces_for = [](bool use_regex, bool prefix, const std::string& text) {
    nlohmann::json spec = {
        {"type", "ByteLevel"}, {"add_prefix_space", prefix}, {"use_regex", use_regex}};
    PreTokenizer pt = PreTokenizer::from_json(spec, "bl.json");
    std::vector<std::string_view> views;
    std::deque<std::string> arena;
    pt.split(text, views, arena);
    return std::vector<std::string>(views.begin(), views.end());
  };
  using V = std::vector<std::string>;
  EXPECT_EQ(pieces_for(true, false, "Hello world's 42!!  x"),
            (V{"Hello", " world", "'s", " 42", "!!", " ", " x"}));
  EXPECT_EQ(pieces_for(true, true, "Hi there"), (V{" Hi", " there"}));
  EXPECT_EQ(pieces_for(false, true, "Hi there"), (V{" Hi there"}));
  EXPECT_EQ(pieces_for(false, true, " x"), (V{" x"}));
  // Through the whole tokenizer: merges never cross the GPT-2 pieces.
  TinySpec spec;
  spec.merges = {{" ", "H"}, {" H", "i"}};
  spec.pre_tokenizer = {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"use_regex", true}};
  EXPECT_EQ(make(spec).encode("Hi"), ids({257}));
}

TEST(Regex, OnigurumaEscapesAreTranslated) {
  EXPECT_EQ(oniguruma_to_pcre2(R"(\s+(?!\S))"), R"(\p{White_Space}+(?!\P{White_Space}))");
  EXPECT_EQ(oniguruma_to_pcre2(R"([^\s\p{L}])"), R"([^\p{White_Space}\p{L}])");
  EXPECT_EQ(oniguruma_to_pcre2(R"([]\s])"), R"([]\p{White_Space}])");
  Regex hex(R"(\h+)", false, "test");
  std::vector<std::pair<size_t, size_t>> m;
  hex.find_all("zz0fA9 q", m);
  ASSERT_EQ(m.size(), 1u);
  EXPECT_EQ(m[0], std::make_pair(size_t{2}, size_t{6}));
}

TEST(TokenizerErrors, UnsupportedComponentsNameFileAndComponent) {
  auto expect_error = [](nlohmann::json j, ErrorKind kind, const std::string& needle) {
    try {
      Tokenizer::from_json(j.dump(), "bad.json");
      ADD_FAILURE() << "no error for " << needle;
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), kind) << e.what();
      EXPECT_NE(std::string(e.what()).find("bad.json"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  nlohmann::json base = tiny_tokenizer_json({});
  auto j = base;
  j["normalizer"] = {{"type", "Precompiled"}};
  expect_error(j, ErrorKind::kUnsupported, "Precompiled");
  j = base;
  j["model"]["type"] = "WordPiece";
  expect_error(j, ErrorKind::kUnsupported, "WordPiece");
  j = base;
  j["decoder"] = {{"type", "Metaspace"}};
  expect_error(j, ErrorKind::kUnsupported, "Metaspace");
  j = base;
  j["model"]["merges"] = {"a zz"};
  expect_error(j, ErrorKind::kBadFormat, "model.merges[0]");
  j = base;
  j["model"]["merges"] = {42};
  expect_error(j, ErrorKind::kBadFormat, "model.merges[0]");
  j = base;
  j["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = "(unclosed";
  expect_error(j, ErrorKind::kBadFormat, "does not compile");
  j = base;
  j.erase("model");
  expect_error(j, ErrorKind::kBadFormat, "model");
  j = base;
  j["truncation"] = {{"max_length", 5}};
  expect_error(j, ErrorKind::kUnsupported, "truncation");
  try {
    Tokenizer::from_json(base.dump().substr(0, 100), "cut.json");
    ADD_FAILURE() << "truncated JSON accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kBadFormat);
    EXPECT_NE(std::string(e.what()).find("cut.json"), std::string::npos);
  }
  EXPECT_THROW(Tokenizer::from_file("/nonexistent/tokenizer.json"), Error);
}

}  // namespace
}  // namespace stoa
