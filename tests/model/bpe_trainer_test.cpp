// BPE trainer: known merges on a tiny corpus, the documented tie-break, determinism, and that a
// trained tokenizer loads and round-trips text exactly.
#include <gtest/gtest.h>

#include "core/error.h"
#include "model/bpe_trainer.h"
#include "model/tokenizer.h"
#include "model/tokenizer_oracle_corpus.h"
#include "model/unicode.h"

namespace stoa {
namespace {

BpeTrainerOptions small(int64_t vocab, int64_t min_frequency = 1) {
  BpeTrainerOptions o;
  o.vocab_size = vocab;
  o.min_frequency = min_frequency;
  return o;
}

std::vector<std::pair<std::string, std::string>> merge_strings(const TrainedBpe& t) {
  std::vector<std::pair<std::string, std::string>> out;
  for (auto [a, b] : t.merges) out.emplace_back(t.tokens[a], t.tokens[b]);
  return out;
}

TEST(BpeTrainer, MostFrequentPairFirst) {
  BpeTrainer trainer(small(256 + 11 + 2));
  trainer.add_text("aab aab aab ab");  // words "aab", " aab" x2, " ab"
  TrainedBpe t = trainer.train();
  auto merges = merge_strings(t);
  ASSERT_EQ(merges.size(), 2u);
  EXPECT_EQ(merges[0], std::make_pair(std::string("a"), std::string("b")));  // 4 times
  // After it: (a,ab) 3 times, (' ',a) twice, (' ',ab) once.
  EXPECT_EQ(merges[1], std::make_pair(std::string("a"), std::string("ab")));
}

TEST(BpeTrainer, TiesGoToTheSmallestPairBytes) {
  BpeTrainer trainer(small(256 + 11 + 3));
  trainer.add_text("ab cd");  // (a,b), (' ',c), (c,d): all once
  auto merges = merge_strings(trainer.train());
  ASSERT_EQ(merges.size(), 3u);
  EXPECT_EQ(merges[0], std::make_pair(std::string(" "), std::string("c")));
  EXPECT_EQ(merges[1], std::make_pair(std::string(" c"), std::string("d")));
  EXPECT_EQ(merges[2], std::make_pair(std::string("a"), std::string("b")));
}

TEST(BpeTrainer, MinFrequencyStopsEarly) {
  BpeTrainer trainer(small(1000, /*min_frequency=*/2));
  trainer.add_text("xy xy q");
  TrainedBpe t = trainer.train();
  // Words "xy", " xy", " q": only (x,y) is seen twice, so exactly one merge.
  EXPECT_EQ(merge_strings(t).size(), 1u);
}

TEST(BpeTrainer, DeterministicAndOrderIndependent) {
  const auto& corpus = test::oracle_corpus(1, 120);
  BpeTrainer forward(small(900)), backward(small(900));
  for (const auto& s : corpus) forward.add_text(s);
  for (auto it = corpus.rbegin(); it != corpus.rend(); ++it) backward.add_text(*it);
  std::string a = forward.train().tokenizer_json();
  std::string b = backward.train().tokenizer_json();
  EXPECT_EQ(a, b);
  EXPECT_EQ(a, forward.train().tokenizer_json());
}

TEST(BpeTrainer, TrainedTokenizerRoundTripsText) {
  const auto& corpus = test::oracle_corpus(2, 150);
  BpeTrainer trainer(small(1200, 2));
  for (const auto& s : corpus) trainer.add_text(s);
  TrainedBpe t = trainer.train();
  EXPECT_EQ(static_cast<int64_t>(t.tokens.size()), 1200);
  Tokenizer tok = Tokenizer::from_json(t.tokenizer_json(), "trained.json");
  EXPECT_EQ(tok.vocab_size(), 1200);
  for (const auto& s : test::oracle_corpus(3, 100)) {
    std::vector<int32_t> ids = tok.encode(s);
    std::string nfc = unicode::normalize(s, unicode::NormalForm::kNFC);
    ASSERT_EQ(tok.decode(ids), nfc);
  }
  // Specials are single special ids; task tags are single, non-special ids.
  auto im_end = tok.token_id("<|im_end|>");
  auto answer = tok.token_id("<answer>");
  ASSERT_TRUE(im_end && answer);
  EXPECT_TRUE(tok.is_special(*im_end));
  EXPECT_FALSE(tok.is_special(*answer));
  std::vector<int32_t> ids = tok.encode("<|im_start|>assistant\n<answer>42</answer><|im_end|>");
  EXPECT_EQ(ids.back(), *im_end);
  EXPECT_EQ(tok.decode(ids, true), "assistant\n<answer>42</answer>");
  // A trained merge really shortens common text.
  EXPECT_LT(tok.encode("The quick brown fox jumps over the lazy dog.").size(), 44u);
}

TEST(BpeTrainer, RejectsTooSmallVocabulary) {
  BpeTrainer trainer(small(100));
  trainer.add_text("abc");
  EXPECT_THROW(trainer.train(), Error);
}

}  // namespace
}  // namespace stoa
