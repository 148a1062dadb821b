// [eval] inside a run (app/eval/run_eval): the evaluator the trainer loop is handed scores the
// published int8 view exactly as `stoa eval --int8` scores the model directory it was made from
// (the same episodes, codec, task and pass@k), and appends each summary to <run dir>/eval.jsonl.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "app/eval/run_eval.h"
#include "model/weights.h"
#include "pulse/model_view.h"
#include "roles/run/minimal_run_config.h"
#include "support/stoa_cli.h"

namespace {
namespace fs = std::filesystem;

using stoa::testing::read_text;

class RunEval : public ::testing::Test {
 protected:
  void SetUp() override {
    dir = fs::temp_directory_path() / ("stoa_run_eval_" + std::to_string(::getpid()));
    fs::create_directories(dir);
    ASSERT_EQ(run("model init --preset tiny-qwen3 --seed 4 --tokenizer bytes --out " +
                  (dir / "model").string()),
              0)
        << read_text(dir / "err.txt");
    ASSERT_EQ(
        run("data generate --papers 120 --questions 40 --seed 3 --out " + (dir / "data").string()),
        0)
        << read_text(dir / "err.txt");
    ASSERT_EQ(run("search index --corpus " + (dir / "data" / "corpus.jsonl").string() + " --out " +
                  (dir / "data" / "index").string()),
              0)
        << read_text(dir / "err.txt");
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
  int run(const std::string& args) { return stoa::testing::run_stoa(dir, args); }

  stoa::run::RunConfig run_config() {
    stoa::run::RunConfig c = stoa::run::minimal_run_config();
    c.run_dir = (dir / "run").string();
    c.model_dir = (dir / "model").string();
    c.data_dir = (dir / "data").string();
    c.task_options.set("index", (dir / "data" / "index").string());
    c.hub.sampling.max_new_tokens = 12;
    c.hub.sampling.max_turns = 2;
    c.hub.sampling.max_observation_tokens = 64;
    c.eval.every_steps = 5;
    c.eval.limit = 3;
    c.eval.pass_at = 2;
    c.eval.temperature = 1.0;
    c.eval.seed = 9;
    c.eval.batch = 3;
    return c;
  }

  fs::path dir;
};

TEST_F(RunEval, ScoresThePublishedViewAsStoaEvalInt8ScoresTheModel) {
  const stoa::run::RunConfig c = run_config();
  fs::create_directories(c.run_dir);
  const stoa::trainer::HeldOutEval eval = stoa::app::held_out_eval(c);
  ASSERT_EQ(eval.every_steps, 5);
  ASSERT_TRUE(eval.evaluate);

  // The view a fresh run publishes as version 0 (what every worker holds then).
  const stoa::ModelWeights weights = stoa::load_model_dir(c.model_dir);
  stoa::pulse::Int8Quantizer quantizer;
  const stoa::pulse::Int8State view = stoa::pulse::int8_view_of(weights, 0, &quantizer);
  const stoa::trainer::HeldOutResult in_run = eval.evaluate(5, 0, view);

  ASSERT_EQ(run("eval --int8 --model " + c.model_dir + " --data " + c.data_dir +
                " --limit 3 --max-new-tokens 12 --max-turns 2 --max-observation-tokens 64 "
                "--pass-at 2 --temperature 1 --seed 9 --batch 3"),
            0)
      << read_text(dir / "err.txt");
  const auto cli = nlohmann::json::parse(read_text(dir / "out.txt"));
  EXPECT_EQ(in_run.questions, 3);
  EXPECT_EQ(in_run.samples_per_question, 2);
  EXPECT_EQ(in_run.split, cli["split"].get<std::string>()) << "the default held-out split";
  EXPECT_EQ(in_run.mean_reward, cli["mean_reward"].get<double>());
  ASSERT_EQ(in_run.pass_at.size(), 2u);
  EXPECT_EQ(in_run.pass_at.at(1), cli["pass_at"]["1"].get<double>());
  EXPECT_EQ(in_run.pass_at.at(2), cli["pass_at"]["2"].get<double>());

  // The run's record: stoa eval's summary with the step and version, token for token the same
  // episodes.
  std::ifstream log(fs::path(c.run_dir) / "eval.jsonl");
  std::string line;
  ASSERT_TRUE(std::getline(log, line));
  const auto record = nlohmann::json::parse(line);
  EXPECT_EQ(record["step"], 5);
  EXPECT_EQ(record["version"], 0);
  EXPECT_EQ(record["weights"], "int8");
  EXPECT_EQ(record["tokens_generated"], cli["tokens_generated"]);
  EXPECT_EQ(record["mean_turns"], cli["mean_turns"]);
  EXPECT_FALSE(std::getline(log, line)) << "one line per evaluation";
}

// No [eval]: nothing to run.
TEST_F(RunEval, NoEverySteps) {
  stoa::run::RunConfig c = run_config();
  c.eval.every_steps = 0;
  EXPECT_FALSE(stoa::app::held_out_eval(c).evaluate);
}

}  // namespace
