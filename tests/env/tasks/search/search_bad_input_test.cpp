// Bad input for the search index: any query bytes, missing or foreign index directories.
#include <gtest/gtest.h>

#include <fstream>

#include "core/error.h"
#include "env/env_test_util.h"
#include "env/tasks/search/bm25_index.h"

namespace stoa::env {
namespace {

TEST(Bm25IndexBadInput, AnyQueryBytesNeverCrash) {
  testing::TempDir dir("index_bad");
  build_bm25_index(testing::small_corpus(), dir.path());
  Bm25Index index(dir.path());
  std::vector<std::string> queries = {
      "",
      " \t\n",
      std::string("\0\0\0", 3),
      std::string("\xff\xfe\xfd Borvex \xc3", 12),
      "AND OR NOT ( ) \" * + - ~ : [ ]",
      "\"unterminated phrase Borvex",
      std::string(1 << 20, 'a'),  // 1 MiB single word
      "\xf0\x9f\x98\x80 emoji \xe2\x80\x8b zero width",
  };
  std::string many_words;
  for (int i = 0; i < 20000; ++i) many_words += "w" + std::to_string(i) + " ";
  queries.push_back(many_words + "Borvex");
  for (const auto& q : queries) {
    EXPECT_NO_THROW(index.search_one(q, 3)) << q.substr(0, 40);
  }
  // A garbage prefix does not stop the real word from being found.
  auto hits = index.search_one(std::string("\xff\xfe\xfd Borvex \xc3", 12), 3);
  ASSERT_FALSE(hits.empty());
  EXPECT_TRUE(hits[0].id == "d1" || hits[0].id == "d3");
  EXPECT_NO_THROW(index.search_one("Borvex", 1 << 30));
  EXPECT_NO_THROW(index.search_one("Borvex", -5));
}

TEST(Bm25IndexBadInput, MissingOrForeignIndex) {
  testing::TempDir dir("index_missing");
  try {
    Bm25Index index(dir / "nope");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kNotFound);
  }
  std::ofstream(dir / "junk") << "not an index";
  try {
    Bm25Index index(dir.path());
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kBadFormat);
    EXPECT_NE(std::string(e.what()).find(dir.path()), std::string::npos);
  }
}

TEST(Bm25IndexBadInput, CorpusWithMalformedLines) {
  testing::TempDir dir("index_badcorpus");
  std::ofstream(dir / "c.jsonl") << "{\"id\":\"1\",\"contents\":\"A\\nalpha\"}\n{broken\n"
                                 << "{\"id\":\"3\",\"contents\":\"B\\nbeta\"}\n";
  EXPECT_THROW(build_bm25_index(dir / "c.jsonl", dir / "i1", BadLinePolicy::kFatal), Error);
  auto stats = build_bm25_index(dir / "c.jsonl", dir / "i2", BadLinePolicy::kSkip);
  EXPECT_EQ(stats.documents, 2);
  EXPECT_EQ(stats.skipped_lines, 1);
}

}  // namespace
}  // namespace stoa::env
