// Real-data loaders: Search-R1 corpus and QA JSONL, malformed lines named by file and line.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "env/dataset.h"

namespace stoa::env {
namespace {

std::string write_temp(const std::string& name, const std::string& text) {
  auto dir =
      std::filesystem::temp_directory_path() / ("stoa_env_jsonl_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::string path = (dir / name).string();
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

TEST(CorpusLoader, ReadsSearchR1Shapes) {
  std::string path = write_temp("corpus.jsonl",
                                "{\"id\": \"1\", \"contents\": \"T1\\nbody one\"}\n"
                                "\n"
                                "{\"id\": 2, \"contents\": \"T2\\nbody two\"}\r\n"
                                "{\"id\": \"3\", \"title\": \"T3\", \"text\": \"body three\"}\n");
  auto docs = load_corpus(path, BadLinePolicy::kFatal);
  ASSERT_EQ(docs.size(), 3u);
  EXPECT_EQ(docs[1].id, "2");
  EXPECT_EQ(docs[1].contents, "T2\nbody two");
  EXPECT_EQ(docs[2].contents, "T3\nbody three");
}

TEST(CorpusLoader, MalformedLineNamesFileAndLine) {
  std::string path = write_temp("bad.jsonl",
                                "{\"id\": \"1\", \"contents\": \"ok\"}\n"
                                "{\"id\": \"2\", \"contents\": \n"
                                "{\"id\": \"3\"}\n"
                                "[1,2]\n"
                                "{\"id\": \"5\", \"contents\": 7}\n"
                                "{\"id\": \"6\", \"contents\": \"ok\"}\n");
  try {
    load_corpus(path, BadLinePolicy::kFatal);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kBadFormat);
    EXPECT_NE(std::string(e.what()).find(path + ":2:"), std::string::npos) << e.what();
  }
  std::vector<CorpusDoc> docs;
  JsonlStats stats = for_each_corpus_doc(path, BadLinePolicy::kSkip,
                                         [&](CorpusDoc&& d) { docs.push_back(std::move(d)); });
  EXPECT_EQ(stats.lines, 6);
  EXPECT_EQ(stats.skipped, 4);
  ASSERT_EQ(docs.size(), 2u);
  EXPECT_EQ(docs[1].id, "6");
}

TEST(CorpusLoader, MissingFileIsIoError) {
  try {
    load_corpus("/nonexistent/corpus.jsonl", BadLinePolicy::kSkip);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kIo);
  }
}

TEST(QaLoader, PaperSearchQaAndSearchR1Shapes) {
  std::string path = write_temp(
      "qa.jsonl",
      "{\"id\": \"q1\", \"question\": \"Which gene?\", \"golden_answers\": [\"A\", \"B\"], "
      "\"answer\": \"A\", \"category\": \"c\", \"pmid\": \"123\", \"paper_title\": \"T\", "
      "\"split\": \"test\"}\n"
      "{\"question\": \"who\", \"golden_answers\": [\"x\", 1990]}\n"
      "{\"question\": \"who\", \"golden_answers\": \"single\"}\n");
  auto items = load_qa(path, BadLinePolicy::kFatal);
  ASSERT_EQ(items.size(), 3u);
  EXPECT_EQ(items[0].pmid, "123");
  EXPECT_EQ(items[0].golden_answers, (std::vector<std::string>{"A", "B"}));
  EXPECT_EQ(items[1].id, "line2");
  EXPECT_EQ(items[1].golden_answers, (std::vector<std::string>{"x", "1990"}));
  EXPECT_EQ(items[1].answer, "x");
  EXPECT_EQ(items[2].golden_answers, (std::vector<std::string>{"single"}));
  // Round trip through our writer.
  auto again = qa_item_from_json(to_json(items[0]));
  EXPECT_EQ(again.category, "c");
  EXPECT_EQ(again.split, "test");
}

TEST(QaLoader, BadRecords) {
  const char* bad[] = {
      "{\"golden_answers\": [\"a\"]}",                        // no question
      "{\"question\": \"q\"}",                                // no answers
      "{\"question\": \"q\", \"golden_answers\": []}",        // empty answers
      "{\"question\": \"q\", \"golden_answers\": [null]}",    // non-string answer
      "{\"question\": \"  \", \"golden_answers\": [\"a\"]}",  // blank question
      "{\"question\": 5, \"golden_answers\": [\"a\"]}",
      "\"just a string\"",
      "{\"question\": \"q\", \"golden_answers\": {\"a\": 1}}",
  };
  for (const char* line : bad) {
    std::string path = write_temp("badqa.jsonl", std::string(line) + "\n");
    try {
      load_qa(path, BadLinePolicy::kFatal);
      FAIL() << line;
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kBadFormat) << line;
      EXPECT_NE(std::string(e.what()).find(":1:"), std::string::npos) << e.what();
    }
    EXPECT_TRUE(load_qa(path, BadLinePolicy::kSkip).empty()) << line;
  }
}

}  // namespace
}  // namespace stoa::env
