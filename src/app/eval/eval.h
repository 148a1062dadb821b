// Mean reward and pass@k of a model on a question split, running each question as the full
// multi-turn episode of a registered task (env/task_registry.h: `search` against a BM25 index or a
// retrieval server, `http`, ...) on the engine. Torch-free: what a worker runs, so the number
// measures the weights workers actually use (int8) or their f32 source, through the workers' codec
// rule (env/model_codec.h). `stoa eval` parses its flags into EvalOptions and calls evaluate(); the
// demo and the experiments run that command as a child process.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/model_runner.h"
#include "env/task_registry.h"

namespace stoa::app {

struct EvalOptions {
  std::string model;  // model directory (config.json, safetensors, tokenizer)
  std::string data;   // dataset directory (<split>.jsonl, and index/ for the search task)
  // The split's file is <data>/<split>.jsonl. Empty: the reference environment's `val`
  // (envs/arithmetic), or PaperSearchQA-mini's `validation` where the dataset has no val.jsonl.
  std::string split;
  std::string questions;  // a QA JSONL file instead of <data>/<split>.jsonl
  std::string task = "search";
  // The task's options (its registry keys). For `search` without `index` or `search_url`,
  // evaluate() uses <data>/index.
  env::TaskOptions task_options;
  int64_t limit = 0;  // 0: all
  bool int8 = false;
  int batch = 16;  // episodes advanced together
  double temperature = 0.0;
  // Samples per question (n of the pass@k estimator). 0: the largest of pass_at (1 without it).
  // More than one needs temperature > 0: greedy samples are all the same episode.
  int samples = 0;
  std::vector<int> pass_at;     // the k of each pass@k reported (1 is always reported)
  double success_reward = 1.0;  // a sample counts as a success for pass@k at reward >= this
  uint64_t seed = 0;
  int max_turns = 4;
  int max_new_tokens = 256;
  int max_observation_tokens = 500;
  std::string transcripts;  // JSONL: one line per question (id, golden, response, reward)
  std::string rollouts;     // JSONL: tokens, loss mask and the sampled tokens' log μ per episode
};

// Runs every question (limited to `limit`) `samples` times and returns the summary: model, task,
// split, questions, samples_per_question, mean_reward (the task's reward averaged over every
// sample), pass1 and pass_at {"k": value} (app/eval/pass_at_k.h: a success is a reward >=
// success_reward), successes, answered_fraction, mean_turns, context_overflows, tokens_generated,
// weights, temperature, seconds. Greedy by default (temperature 0): pass@1 of the policy's mode,
// and the same whatever `batch` is. kInvalidArgument for a bad batch / token budget / samples /
// k, an unknown task or option, an empty question file; kNotFound for a missing question file;
// kNetwork when the task fails (a score over episodes the task could not run would be wrong).
nlohmann::json evaluate(const EvalOptions& options);

// evaluate() on weights already in an engine (a run's published int8 view: app/eval/run_eval.h).
// options.model still names the model directory whose tokenizer and chat template the episodes
// use; options.int8 names the weights in the summary.
nlohmann::json evaluate_engine(const EvalOptions& options, engine::ModelRunner& model);

// The task an eval runs: `options.task` from the registry with its options (search's default
// index filled in).
env::TaskOptions eval_task_options(const EvalOptions& options);

// The split evaluate() reads from options.data when options.questions is empty: options.split, or
// by default `val`, or `validation` where only that file exists.
std::string eval_split(const EvalOptions& options);

}  // namespace stoa::app
