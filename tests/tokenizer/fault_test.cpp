// Bad input for the tokenizer (label fault: CI also runs it under ASan+UBSan): truncated,
// byte-flipped and type-mangled tokenizer.json files must give a stoa::Error naming the file, and
// arbitrary bytes to encode() or arbitrary ids to decode() must never crash.
#include <random>

#include <gtest/gtest.h>

#include "core/error.h"
#include "model/tokenizer.h"
#include "tokenizer/tiny_tokenizer.h"

namespace stoa {
namespace {

std::string sample_json() {
  test::TinySpec spec;
  spec.merges = {{"t", "h"}, {"th", "e"}, {" ", "the"}, {"i", "n"}, {"in", "g"}, {"\xE4", "\xB8"}};
  spec.added = {test::added_token("<|im_start|>", true), test::added_token("<|im_end|>", true),
                test::added_token("<think>", false)};
  return test::tiny_tokenizer_json(spec).dump();
}

// Loading either succeeds or throws stoa::Error whose message names the file.
bool load_or_error(const std::string& text, std::optional<Tokenizer>& out) {
  try {
    out = Tokenizer::from_json(text, "fuzz.json");
    return true;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("fuzz.json"), std::string::npos) << e.what();
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

TEST(TokenizerFault, ByteFlipsNeverCrash) {
  std::string json = sample_json();
  std::mt19937 rng(5);
  int loaded = 0;
  for (int trial = 0; trial < 300; ++trial) {
    std::string bad = json;
    for (int k = 0; k < 1 + trial % 3; ++k) bad[rng() % bad.size()] = static_cast<char>(rng());
    std::optional<Tokenizer> tok;
    if (!load_or_error(bad, tok)) continue;
    ++loaded;
    // A file that still loads must still tokenize without crashing.
    for (const char* text : {"the thing <|im_end|>", "\xE4\xB8\x96", "", "<think>x</think>"}) {
      std::vector<int32_t> ids = tok->encode(text, true);
      try {
        tok->decode(ids);
      } catch (const Error&) {
      }
    }
  }
  EXPECT_GT(loaded, 0);  // some flips land in harmless places (e.g. inside a token string)
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
  std::mt19937 rng(11);
  for (int trial = 0; trial < 2000; ++trial) {
    std::string junk(rng() % 64, '\0');
    for (char& c : junk) c = static_cast<char>(rng() % 4 == 0 ? "<|>"[rng() % 3] : rng());
    std::vector<int32_t> ids = tok.encode(junk, trial % 2 == 0);
    for (int32_t id : ids) ASSERT_TRUE(id >= 0 && id < tok.vocab_size());
    std::string back = tok.decode(ids);
    EXPECT_EQ(tok.encode(back, false).size() > 0, !back.empty());
    std::vector<int32_t> random_ids(rng() % 8);
    for (auto& id : random_ids) id = static_cast<int32_t>(rng() % (tok.vocab_size() + 4)) - 2;
    try {
      tok.decode(random_ids, trial % 3 == 0);
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
    }
  }
}

}  // namespace
}  // namespace stoa
