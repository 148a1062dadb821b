// Bad input for the tokenizer (label fault: CI also runs it under ASan+UBSan): truncated,
// byte-flipped and type-mangled tokenizer.json files must give a stoa::Error naming the file, and
// arbitrary bytes to encode() must never crash; decode() refuses every id outside the vocabulary
// with kInvalidArgument naming it.
#include <cstdio>
#include <limits>
#include <optional>
#include <random>

#include <gtest/gtest.h>

#include "core/error.h"
#include "model/tiny_tokenizer.h"
#include "model/tokenizer.h"

namespace stoa {
namespace {

std::string sample_json() {
  test::TinySpec spec;
  spec.merges = {{"t", "h"}, {"th", "e"}, {" ", "the"}, {"i", "n"}, {"in", "g"}, {"\xE4", "\xB8"}};
  spec.added = {test::added_token("<|im_start|>", true), test::added_token("<|im_end|>", true),
                test::added_token("<think>", false)};
  return test::tiny_tokenizer_json(spec).dump();
}

// Loading either succeeds or throws stoa::Error whose message names the file: kBadFormat for a
// malformed file, kUnsupported for a well-formed one asking for a feature Stoa lacks.
bool load_or_error(const std::string& text, std::optional<Tokenizer>& out) {
  try {
    out = Tokenizer::from_json(text, "fuzz.json");
    return true;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("fuzz.json"), std::string::npos) << e.what();
    EXPECT_TRUE(e.kind() == ErrorKind::kBadFormat || e.kind() == ErrorKind::kUnsupported)
        << error_kind_name(e.kind()) << ": " << e.what();
    return false;
  }
}

TEST(TokenizerFault, EveryTruncationIsAnError) {
  std::string json = sample_json();
  for (size_t cut = 0; cut < json.size(); cut += 1 + cut / 50) {
    std::optional<Tokenizer> tok;
    EXPECT_FALSE(load_or_error(json.substr(0, cut), tok)) << "accepted a cut at " << cut;
  }
}

TEST(TokenizerFault, ByteFlipsAreRefusedOrStillRoundTrip) {
  std::string json = sample_json();
  std::mt19937 rng(5);
  int loaded = 0, refused = 0;
  for (int trial = 0; trial < 300; ++trial) {
    std::string bad = json;
    for (int k = 0; k < 1 + trial % 3; ++k) bad[rng() % bad.size()] = static_cast<char>(rng());
    std::optional<Tokenizer> tok;
    if (!load_or_error(bad, tok)) {
      ++refused;
      continue;
    }
    ++loaded;
    // A file that still loads is still a working tokenizer: every id it produces is in its
    // vocabulary and decodes, and text made of bytes it can spell comes back unchanged.
    for (const char* text : {"the thing <|im_end|>", "\xE4\xB8\x96", "", "<think>x</think>"}) {
      std::vector<int32_t> ids = tok->encode(text, true);
      for (int32_t id : ids)
        ASSERT_TRUE(id >= 0 && id < tok->vocab_size()) << "trial " << trial << ": id " << id;
      std::string back;
      ASSERT_NO_THROW(back = tok->decode(ids)) << "trial " << trial << ": " << text;
      EXPECT_EQ(back, text) << "trial " << trial;
    }
  }
  EXPECT_EQ(loaded + refused, 300);
  // Most flips break the JSON or a field; some land in harmless places (inside a token string).
  EXPECT_GT(loaded, 0);
  EXPECT_GT(refused, 150);
  std::printf("[tokenizer fault] 300 flipped files: %d loaded, %d refused\n", loaded, refused);
}

TEST(TokenizerFault, WrongTypesAndAbsurdValuesAreErrors) {
  nlohmann::json base = nlohmann::json::parse(sample_json());
  std::vector<std::function<void(nlohmann::json&)>> mutations = {
      [](auto& j) { j["model"]["vocab"]["a"] = "x"; },
      [](auto& j) { j["model"]["vocab"]["a"] = -1; },
      [](auto& j) { j["model"]["vocab"]["a"] = 2000000000; },
      [](auto& j) { j["model"]["vocab"]["zz"] = 97; },  // id used twice
      [](auto& j) { j["model"]["vocab"] = nlohmann::json::array(); },
      [](auto& j) { j["model"]["merges"] = "th e"; },
      [](auto& j) { j["model"]["merges"][0] = nlohmann::json::array({"t"}); },
      [](auto& j) { j["model"]["merges"][0] = "the"; },
      [](auto& j) { j["model"]["merges"][0] = " t"; },
      [](auto& j) { j["model"]["unk_token"] = "<nope>"; },
      [](auto& j) { j["model"]["dropout"] = 0.1; },
      [](auto& j) { j["added_tokens"][0]["id"] = "x"; },
      [](auto& j) { j["added_tokens"][0]["content"] = ""; },
      [](auto& j) { j["added_tokens"][0]["special"] = "yes"; },
      [](auto& j) { j["added_tokens"] = 3; },
      [](auto& j) {
        j["normalizer"] = {{"type", 7}};
      },
      [](auto& j) {
        j["normalizer"] = {{"type", "Sequence"}, {"normalizers", 1}};
      },
      [](auto& j) { j["pre_tokenizer"] = nullptr; },
      [](auto& j) {
        j["pre_tokenizer"] = {{"type", "Whitespace"}};
      },
      [](auto& j) { j["pre_tokenizer"]["pretokenizers"][0]["behavior"] = "Sideways"; },
      [](auto& j) {
        j["pre_tokenizer"]["pretokenizers"][0]["pattern"] = {{"Glob", "*"}};
      },
      [](auto& j) { j["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = "[a-"; },
      [](auto& j) { j["pre_tokenizer"]["pretokenizers"][1]["use_regex"] = "no"; },
      [](auto& j) {
        j["post_processor"] = {{"type", "TemplateProcessing"}, {"single", 5}};
      },
      [](auto& j) {
        j["post_processor"] = {{"type", "RobertaProcessing"}};
      },
      [](auto& j) { j["decoder"] = nullptr; },
      [](auto& j) { j["model"] = 1; },
      [](auto& j) { j = nlohmann::json::array(); },
  };
  for (size_t i = 0; i < mutations.size(); ++i) {
    nlohmann::json j = base;
    mutations[i](j);
    std::optional<Tokenizer> tok;
    EXPECT_FALSE(load_or_error(j.dump(), tok)) << "mutation " << i << " was accepted";
  }
}

TEST(TokenizerFault, ArbitraryBytesAndIds) {
  Tokenizer tok = Tokenizer::from_json(sample_json(), "sample.json");
  const int64_t vocab = tok.vocab_size();
  std::mt19937 rng(11);
  int decoded = 0, refused = 0;
  for (int trial = 0; trial < 2000; ++trial) {
    std::string junk(rng() % 64, '\0');
    for (char& c : junk) c = static_cast<char>(rng() % 4 == 0 ? "<|>"[rng() % 3] : rng());
    std::vector<int32_t> ids = tok.encode(junk, trial % 2 == 0);
    for (int32_t id : ids) ASSERT_TRUE(id >= 0 && id < vocab);
    std::string back = tok.decode(ids);
    EXPECT_EQ(tok.encode(back, false).size() > 0, !back.empty());
    // Ids in [-2, V + 2): decode must refuse exactly the lists holding an id outside [0, V)
    // (or a hole in the vocabulary: an id with no token), naming the first such id.
    std::vector<int32_t> random_ids(rng() % 8);
    std::optional<int32_t> first_bad;
    for (auto& id : random_ids) {
      id = static_cast<int32_t>(rng() % (vocab + 4)) - 2;
      if (!first_bad && (id < 0 || id >= vocab || tok.token_text(id).empty())) first_bad = id;
    }
    try {
      tok.decode(random_ids, trial % 3 == 0);
      ++decoded;
      EXPECT_FALSE(first_bad) << "decode accepted the id " << *first_bad;
    } catch (const Error& e) {
      ++refused;
      EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
      ASSERT_TRUE(first_bad) << "decode refused valid ids: " << e.what();
      EXPECT_NE(
          std::string(e.what()).find(cat("token id ", *first_bad, " is not in the vocabulary")),
          std::string::npos)
          << e.what();
    }
  }
  EXPECT_EQ(decoded + refused, 2000);
  EXPECT_GT(decoded, 0);
  EXPECT_GT(refused, 0);
}

TEST(TokenizerFault, DecodeRejectsEachOutOfRangeId) {
  Tokenizer tok = Tokenizer::from_json(sample_json(), "sample.json");
  const auto vocab = static_cast<int32_t>(tok.vocab_size());
  for (int32_t bad : {-2, -1, vocab, vocab + 1, std::numeric_limits<int32_t>::min(),
                      std::numeric_limits<int32_t>::max()}) {
    for (bool skip_special : {false, true}) {
      const std::vector<int32_t> ids = {0, bad, 1};
      try {
        tok.decode(ids, skip_special);
        ADD_FAILURE() << "decode accepted the id " << bad;
      } catch (const Error& e) {
        EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument) << e.what();
        const std::string what = e.what();
        EXPECT_NE(what.find(cat("token id ", bad, " is not in the vocabulary (size ", vocab, ")")),
                  std::string::npos)
            << what;
        EXPECT_NE(what.find("sample.json"), std::string::npos) << what;
      }
    }
  }
  EXPECT_NO_THROW(tok.decode(std::vector<int32_t>{0, vocab - 1}));
}

}  // namespace
}  // namespace stoa
