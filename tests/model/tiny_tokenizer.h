// Builds small byte-level BPE tokenizer.json texts for tests: all 256 byte tokens (ids 0..255),
// then one token per merge, then the added tokens.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "model/unicode.h"

namespace stoa::test {

struct TinySpec {
  std::vector<std::pair<std::string, std::string>> merges;  // raw text halves, e.g. {"a", "b"}
  std::vector<nlohmann::json> added;                        // added_tokens entries (ids assigned)
  bool legacy_merges = false;                               // "a b" strings instead of pairs
  nlohmann::json normalizer = {{"type", "NFC"}};
  nlohmann::json pre_tokenizer;  // default: Qwen-style Split + ByteLevel(use_regex=false)
  nlohmann::json post_processor = {{"type", "ByteLevel"}};
};

// GPT-2 byte spelling of raw bytes.
inline std::string spell(const std::string& raw) {
  std::string out;
  for (char c : raw) out += unicode::byte_level_strings()[static_cast<uint8_t>(c)];
  return out;
}

inline nlohmann::json tiny_tokenizer_json(const TinySpec& spec) {
  nlohmann::json vocab = nlohmann::json::object();
  int id = 0;
  for (int b = 0; b < 256; ++b) vocab[unicode::byte_level_strings()[b]] = id++;
  nlohmann::json merges = nlohmann::json::array();
  for (const auto& [a, b] : spec.merges) {
    std::string merged = spell(a + b);
    if (!vocab.contains(merged)) vocab[merged] = id++;
    if (spec.legacy_merges) {
      merges.push_back(spell(a) + " " + spell(b));
    } else {
      merges.push_back({spell(a), spell(b)});
    }
  }
  nlohmann::json added = nlohmann::json::array();
  for (nlohmann::json t : spec.added) {
    t["id"] = id++;
    added.push_back(t);
  }
  nlohmann::json pre = spec.pre_tokenizer;
  if (pre.is_null()) {
    pre = {
        {"type", "Sequence"},
        {"pretokenizers",
         {{{"type", "Split"},
           {"pattern",
            {{"Regex",
              R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)"}}},
           {"behavior", "Isolated"},
           {"invert", false}},
          {{"type", "ByteLevel"},
           {"add_prefix_space", false},
           {"trim_offsets", false},
           {"use_regex", false}}}}};
  }
  return {{"version", "1.0"},
          {"truncation", nullptr},
          {"padding", nullptr},
          {"added_tokens", added},
          {"normalizer", spec.normalizer},
          {"pre_tokenizer", pre},
          {"post_processor", spec.post_processor},
          {"decoder", {{"type", "ByteLevel"}}},
          {"model",
           {{"type", "BPE"},
            {"dropout", nullptr},
            {"unk_token", nullptr},
            {"ignore_merges", false},
            {"vocab", vocab},
            {"merges", merges}}}};
}

inline nlohmann::json added_token(const std::string& content, bool special, bool lstrip = false,
                                  bool rstrip = false) {
  return {{"content", content}, {"special", special},  {"lstrip", lstrip},
          {"rstrip", rstrip},   {"normalized", false}, {"single_word", false}};
}

}  // namespace stoa::test
