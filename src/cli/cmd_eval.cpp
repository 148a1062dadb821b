// `stoa eval`: mean reward and pass@k of a model on a question split, each question the full
// multi-turn episode of a registered task (default `search` against <data>/index) on the engine
// (app/eval/eval.h).
#include <cstdio>
#include <fstream>
#include <memory>

#include "app/eval/eval.h"
#include "cli/command.h"
#include "cli/task_option_flags.h"
#include "core/error.h"

namespace stoa::cli {
namespace {

struct Options {
  app::EvalOptions eval;
  TaskOptionFlags task_flags;
  std::string json_out;  // also write the summary here
};

int run(Options& o) {
  o.eval.task_options = o.task_flags.options();
  const std::string out = app::evaluate(o.eval).dump(2);
  std::printf("%s\n", out.c_str());
  if (!o.json_out.empty()) {
    std::ofstream f(o.json_out);
    STOA_CHECK(f.good(), ErrorKind::kIo, "eval: cannot write ", o.json_out);
    f << out << '\n';
  }
  return 0;
}

CommandRegistration eval_cmd(
    "eval",
    "mean reward and pass@k of a model on a question split (multi-turn episodes of a task, "
    "default search)",
    [](CLI::App& app) {
      auto o = std::make_shared<Options>();
      app::EvalOptions& e = o->eval;
      app.add_option("--model", e.model, "model directory (config.json, safetensors)")->required();
      app.add_option("--data", e.data, "dataset directory (<split>.jsonl)")->required();
      app.add_option("--task", e.task, "the task each question runs as (search, http, ...)");
      o->task_flags.add_to(app,
                           "KEY=VALUE: an option of the task (e.g. topk=3); repeatable; search "
                           "without index or search_url uses <data>/index");
      app.add_option("--split", e.split,
                     "split to evaluate, <data>/<split>.jsonl (default val, or validation where "
                     "the dataset has no val.jsonl)");
      app.add_option("--questions", e.questions,
                     "a QA JSONL file to evaluate instead of <data>/<split>.jsonl (e.g. the "
                     "train questions `stoa data demos --hold-out` kept out of the SFT data)");
      app.add_option("--limit", e.limit, "evaluate only the first N questions (0: all)");
      app.add_flag("--int8", e.int8, "run the int8 (worker) weights instead of f32");
      app.add_option("--batch", e.batch, "episodes advanced together");
      app.add_option("--temperature", e.temperature, "sampling temperature (0: greedy)");
      app.add_option("--seed", e.seed, "sampling seed");
      app.add_option("--pass-at", e.pass_at,
                     "report pass@K (unbiased estimator over --samples per question); repeatable")
          ->check(CLI::PositiveNumber);
      app.add_option("--samples", e.samples,
                     "samples per question (default: the largest --pass-at; > 1 needs "
                     "--temperature > 0)");
      app.add_option("--success-reward", e.success_reward,
                     "a sample's reward that counts as a success for pass@k (default 1)");
      app.add_option("--max-turns", e.max_turns, "tool turns before the final answer turn");
      app.add_option("--max-new-tokens", e.max_new_tokens, "tokens per turn");
      app.add_option("--max-observation-tokens", e.max_observation_tokens,
                     "observation budget per tool call");
      app.add_option("--json", o->json_out, "also write the JSON summary to this file");
      app.add_option("--transcripts", e.transcripts,
                     "write every episode (question, golden answers, response, reward) as JSONL");
      app.add_option("--rollouts", e.rollouts,
                     "write every episode's tokens, loss mask and sampled log-probs (mu) as JSONL "
                     "(what `stoa experiment mismatch` scores)");
      return [o] { return run(*o); };
    });

}  // namespace
}  // namespace stoa::cli
