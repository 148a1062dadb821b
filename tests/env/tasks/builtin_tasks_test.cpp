// The tasks this build registers: "search" is built by name from its options (a real BM25 index,
// or a retrieval server's URL), behaves like the SearchTask the hub and the worker used to
// construct by hand, and an unknown name fails listing the known ones.
#include <gtest/gtest.h>

#include "core/error.h"
#include "env/env_test_util.h"
#include "env/episode.h"
#include "env/tasks/builtin_tasks.h"
#include "env/tasks/search/bm25_index.h"
#include "env/tasks/search/search_task.h"

namespace stoa::env {
namespace {

QaItem velor_problem() {
  QaItem q;
  q.id = "q1";
  q.question = "Mutations in which gene cause Velor syndrome";
  q.golden_answers = {"KRAV3"};
  return q;
}

TEST(BuiltinTasks, SearchByNameMatchesTheHandBuiltTask) {
  testing::TempDir dir("builtin_search");
  build_bm25_index(testing::small_corpus(), dir.path());
  EXPECT_EQ(builtin_tasks().names(), (std::vector<std::string>{"http", "search"}));

  std::unique_ptr<Task> by_name = make_task("search", {{"index", dir.path()}, {"topk", "2"}});
  ASSERT_NE(by_name, nullptr);
  EXPECT_EQ(by_name->name(), "search");
  Bm25Index index(dir.path());
  SearchTask by_hand(index, 2);

  // The same transcript, token for token, through both.
  ByteCodec codec;
  const QaItem q = velor_problem();
  Episode a(*by_name, q, codec, {4, 500}), b(by_hand, q, codec, {4, 500});
  for (const std::string turn :
       {"<think>x</think><search> Velor syndrome gene </search>", "<answer> KRAV3 </answer>"}) {
    Decision da = a.step(codec.encode(turn)), db = b.step(codec.encode(turn));
    EXPECT_EQ(da.action, db.action);
    EXPECT_EQ(da.tool, db.tool);
    EXPECT_EQ(da.appended, db.appended);
  }
  EXPECT_EQ(a.tokens(), b.tokens());
  EXPECT_EQ(a.loss_mask(), b.loss_mask());
  EXPECT_EQ(a.reward(), 1.0);
  // topk = 2: two documents were shown, not the default three.
  const std::string shown = a.response_text();
  EXPECT_NE(shown.find("Doc 2("), std::string::npos);
  EXPECT_EQ(shown.find("Doc 3("), std::string::npos);
}

TEST(BuiltinTasks, UnknownTaskNameIsAClearError) {
  try {
    make_task("calculator", {});
    FAIL() << "an unknown task was built";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kNotFound);
    EXPECT_STREQ(e.what(), "unknown task 'calculator' (known tasks: http, search)");
  }
}

TEST(BuiltinTasks, SearchOptionsAreChecked) {
  auto kind_of = [](const TaskOptions& options) {
    try {
      make_task("search", options);
    } catch (const Error& e) {
      return e.kind();
    }
    return ErrorKind::kInternal;  // built: not what any case below expects
  };
  // Neither or both of index and search_url.
  EXPECT_EQ(kind_of({}), ErrorKind::kInvalidArgument);
  EXPECT_EQ(kind_of({{"index", "/nonexistent"}, {"search_url", "http://127.0.0.1:1"}}),
            ErrorKind::kInvalidArgument);
  EXPECT_EQ(kind_of({{"idx", "/tmp"}}), ErrorKind::kInvalidArgument);  // misspelt
  EXPECT_EQ(kind_of({{"search_url", "http://127.0.0.1:1"}, {"topk", "three"}}),
            ErrorKind::kInvalidArgument);
  EXPECT_EQ(kind_of({{"search_url", "http://127.0.0.1:1"}, {"topk", "0"}}),
            ErrorKind::kInvalidArgument);
  EXPECT_EQ(kind_of({{"index", "/nonexistent/stoa/index"}}), ErrorKind::kNotFound);
  // A server URL alone builds (the client connects on the first search).
  std::unique_ptr<Task> remote = make_task("search", {{"search_url", "http://127.0.0.1:1"}});
  EXPECT_EQ(remote->name(), "search");
}

}  // namespace
}  // namespace stoa::env
