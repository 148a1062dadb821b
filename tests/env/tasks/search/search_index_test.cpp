// BM25 retrieval over a real Xapian index: ranking sanity, stemming, stop words, scores.
#include <gtest/gtest.h>

#include "core/error.h"
#include "env/env_test_util.h"
#include "env/tasks/search/bm25_index.h"

namespace stoa::env {
namespace {

TEST(Bm25Index, RanksTheRelevantDocumentFirst) {
  testing::TempDir dir("index");
  auto stats = build_bm25_index(testing::small_corpus(), dir.path());
  EXPECT_EQ(stats.documents, 6);
  Bm25Index index(dir.path());
  EXPECT_EQ(index.size(), 6);

  auto hits = index.search_one("Velor syndrome gene", 3);
  ASSERT_GE(hits.size(), 2u);
  EXPECT_EQ(hits[0].id, "d2");
  EXPECT_EQ(hits[1].id, "d1");
  EXPECT_GT(hits[0].score, hits[1].score);
  EXPECT_EQ(hits[0].contents, testing::small_corpus()[1].contents);

  // Stemming: "treated" matches "treats"/"treatment"; case does not matter.
  hits = index.search_one("what TREATED melvar", 1);
  ASSERT_EQ(hits.size(), 1u);
  EXPECT_EQ(hits[0].id, "d6");

  hits = index.search_one("Borvex half-life", 3);
  ASSERT_FALSE(hits.empty());
  EXPECT_EQ(hits[0].id, "d3");

  // topk bounds the list; a query of stop words only finds nothing.
  EXPECT_EQ(index.search_one("Borvex", 1).size(), 1u);
  EXPECT_TRUE(index.search_one("the of and", 3).empty());
  EXPECT_TRUE(index.search_one("Borvex", 0).empty());
  EXPECT_TRUE(index.search_one("nonexistentword", 3).empty());
}

TEST(Bm25Index, BatchSearchKeepsQueryOrder) {
  testing::TempDir dir("index_batch");
  build_bm25_index(testing::small_corpus(), dir.path());
  Bm25Index index(dir.path());
  auto results = index.search({"Tamorin", "Zentrax", ""}, 2);
  ASSERT_EQ(results.size(), 3u);
  EXPECT_EQ(results[0].at(0).id, "d4");
  EXPECT_EQ(results[1].at(0).id, "d6");
  EXPECT_TRUE(results[2].empty());
}

TEST(Bm25Index, BuildFromCorpusFile) {
  testing::TempDir dir("index_file");
  std::vector<nlohmann::json> records;
  for (const auto& d : testing::small_corpus()) records.push_back(to_json(d));
  write_jsonl(dir / "corpus.jsonl", records);
  auto stats = build_bm25_index(dir / "corpus.jsonl", dir / "idx", BadLinePolicy::kFatal);
  EXPECT_EQ(stats.documents, 6);
  EXPECT_GT(stats.docs_per_second(), 0);
  EXPECT_EQ(Bm25Index(dir / "idx").search_one("KRAV3", 1).at(0).id, "d2");
}

}  // namespace
}  // namespace stoa::env
