// `stoa eval` (app/eval) through the real binary: a tiny random model (byte-level codec), a small
// generated PaperSearchQA-mini with its BM25 index, full multi-turn episodes on the engine; and
// the task options evaluate() builds.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "app/eval/eval.h"
#include "support/stoa_cli.h"

namespace {
namespace fs = std::filesystem;

using stoa::testing::read_text;

class EvalCli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir = new fs::path(fs::temp_directory_path() / ("stoa_eval_" + std::to_string(::getpid())));
    fs::create_directories(*dir);
    ASSERT_EQ(run("model init --preset tiny-qwen3 --seed 3 --tokenizer bytes --out " +
                  (*dir / "model").string()),
              0)
        << read_text(*dir / "err.txt");
    ASSERT_EQ(
        run("data generate --papers 200 --questions 60 --seed 2 --out " + (*dir / "data").string()),
        0)
        << read_text(*dir / "err.txt");
    ASSERT_EQ(run("search index --corpus " + (*dir / "data" / "corpus.jsonl").string() + " --out " +
                  (*dir / "data" / "index").string()),
              0)
        << read_text(*dir / "err.txt");
  }
  static void TearDownTestSuite() {
    std::error_code ec;
    fs::remove_all(*dir, ec);
    delete dir;
  }
  static int run(const std::string& args) { return stoa::testing::run_stoa(*dir, args); }
  static nlohmann::json eval(const std::string& extra) {
    const std::string args = "eval --model " + (*dir / "model").string() + " --data " +
                             (*dir / "data").string() + " --limit 6 --max-new-tokens 12 " + extra;
    EXPECT_EQ(run(args), 0) << read_text(*dir / "err.txt");
    return nlohmann::json::parse(read_text(*dir / "out.txt"));
  }
  static inline fs::path* dir = nullptr;
};

TEST_F(EvalCli, SummaryAndBatchInvariance) {
  auto one = eval("--batch 1");
  EXPECT_EQ(one["questions"], 6);
  EXPECT_EQ(one["split"], "validation");
  const double p = one["pass1"];
  EXPECT_GE(p, 0.0);
  EXPECT_LE(p, 1.0);
  // Every question ran at least one turn of 12 tokens (a random model never stops early on
  // a stop string that long).
  EXPECT_GE(one["tokens_generated"].get<int64_t>(), 6 * 12);
  EXPECT_GE(one["mean_turns"].get<double>(), 1.0);
  // Greedy decoding is a function of the weights only: batching episodes changes nothing.
  auto four = eval("--batch 4");
  EXPECT_EQ(four["pass1"], one["pass1"]);
  EXPECT_EQ(four["tokens_generated"], one["tokens_generated"]);
  EXPECT_EQ(four["mean_turns"], one["mean_turns"]);
  auto q = eval("--batch 3 --int8");
  EXPECT_EQ(q["weights"], "int8");
  EXPECT_EQ(q["questions"], 6);
}

// The task comes from the registry by name with its options; search's default index is
// <data>/index, so naming it (or the task) explicitly changes nothing.
TEST_F(EvalCli, TaskFromTheRegistry) {
  auto implicit = eval("--batch 2");
  EXPECT_EQ(implicit["task"], "search");
  auto named = eval("--batch 2 --task search --task-option topk=3 --task-option index=" +
                    (*dir / "data" / "index").string());
  EXPECT_EQ(named["pass1"], implicit["pass1"]);
  EXPECT_EQ(named["tokens_generated"], implicit["tokens_generated"]);
  auto shorthand = eval("--batch 2 --index " + (*dir / "data" / "index").string());
  EXPECT_EQ(shorthand["tokens_generated"], implicit["tokens_generated"]);
}

// pass@k from n sampled episodes per question, beside the task-neutral mean reward.
TEST_F(EvalCli, PassAtKFromSeveralSamples) {
  auto j = eval("--batch 4 --temperature 1 --seed 5 --pass-at 2 --pass-at 4");
  EXPECT_EQ(j["samples_per_question"], 4);
  EXPECT_EQ(j["questions"], 6);
  // Every one of the 6 x 4 episodes ran (at least one turn of 12 tokens each).
  EXPECT_GE(j["tokens_generated"].get<int64_t>(), 6 * 4 * 12);
  ASSERT_TRUE(j["pass_at"].contains("1") && j["pass_at"].contains("2") &&
              j["pass_at"].contains("4"))
      << j.dump();
  EXPECT_LE(j["pass_at"]["1"].get<double>(), j["pass_at"]["2"].get<double>());
  EXPECT_LE(j["pass_at"]["2"].get<double>(), j["pass_at"]["4"].get<double>());
  EXPECT_EQ(j["pass1"], j["pass_at"]["1"]);
  EXPECT_TRUE(j["mean_reward"].is_number());
  // Greedy samples would all be one episode: refused, as is a k beyond the samples.
  const std::string base = "eval --model " + (*dir / "model").string() + " --data " +
                           (*dir / "data").string() + " --limit 2 ";
  EXPECT_NE(run(base + "--pass-at 4"), 0);
  EXPECT_NE(read_text(*dir / "err.txt").find("--temperature"), std::string::npos)
      << read_text(*dir / "err.txt");
  EXPECT_NE(run(base + "--temperature 1 --samples 2 --pass-at 4"), 0);
  EXPECT_NE(read_text(*dir / "err.txt").find("pass-at 4"), std::string::npos)
      << read_text(*dir / "err.txt");
}

// The default split is the reference environment's val.jsonl (envs/arithmetic); a dataset with
// only validation.jsonl (PaperSearchQA-mini) still evaluates without --split.
TEST_F(EvalCli, DefaultSplitIsVal) {
  const fs::path data = *dir / "val_data";
  fs::create_directories(data);
  std::ifstream in(*dir / "data" / "validation.jsonl");
  std::ofstream out(data / "val.jsonl");
  std::string line;
  for (int i = 0; i < 2 && std::getline(in, line); ++i) out << line << '\n';
  out.close();
  ASSERT_EQ(run("eval --model " + (*dir / "model").string() + " --data " + data.string() +
                " --index " + (*dir / "data" / "index").string() + " --max-new-tokens 4"),
            0)
      << read_text(*dir / "err.txt");
  const auto j = nlohmann::json::parse(read_text(*dir / "out.txt"));
  EXPECT_EQ(j["split"], "val");
  EXPECT_EQ(j["questions"], 2);
}

TEST_F(EvalCli, BadTaskIsAClearError) {
  const std::string base =
      "eval --model " + (*dir / "model").string() + " --data " + (*dir / "data").string() + " ";
  // An unknown task names the ones the build knows.
  EXPECT_NE(run(base + "--task nope"), 0);
  EXPECT_NE(read_text(*dir / "err.txt").find("search"), std::string::npos)
      << read_text(*dir / "err.txt");
  // A misspelt option never falls back to a default.
  EXPECT_NE(run(base + "--task-option topck=3"), 0);
  EXPECT_NE(read_text(*dir / "err.txt").find("topck"), std::string::npos)
      << read_text(*dir / "err.txt");
  EXPECT_NE(run(base + "--task-option topk"), 0);
  EXPECT_NE(read_text(*dir / "err.txt").find("KEY=VALUE"), std::string::npos)
      << read_text(*dir / "err.txt");
}

TEST_F(EvalCli, BadInputIsAClearError) {
  EXPECT_NE(run("eval --model " + (*dir / "model").string() + " --data " +
                (*dir / "data").string() + " --split nope"),
            0);
  EXPECT_NE(read_text(*dir / "err.txt").find("nope.jsonl"), std::string::npos)
      << read_text(*dir / "err.txt");
  EXPECT_NE(
      run("eval --model " + (*dir / "missing").string() + " --data " + (*dir / "data").string()),
      0);
  EXPECT_NE(run("eval --model " + (*dir / "model").string() + " --data " +
                (*dir / "data").string() + " --batch 0"),
            0);
}

// search's default index is the dataset's; a server, an explicit index or another task is
// left as given.
TEST(EvalTaskOptions, SearchDefaultsToTheDatasetIndex) {
  stoa::app::EvalOptions o;
  o.data = "/d";
  EXPECT_EQ(stoa::app::eval_task_options(o).get("index"), "/d/index");
  o.task_options.set("search_url", "http://127.0.0.1:1");
  EXPECT_FALSE(stoa::app::eval_task_options(o).has("index"));
  o.task_options = {{"index", "/elsewhere"}};
  EXPECT_EQ(stoa::app::eval_task_options(o).get("index"), "/elsewhere");
  o.task = "http";
  o.task_options = {};
  EXPECT_TRUE(stoa::app::eval_task_options(o).empty());
}

}  // namespace
