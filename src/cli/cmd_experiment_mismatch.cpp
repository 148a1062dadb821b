// `stoa experiment mismatch`: int8 vs f32 worker weights scored by the f32 trainer
// (app/experiments/mismatch.h).
#include <memory>

#include "app/experiments/mismatch.h"
#include "cli/command.h"

namespace stoa::cli {
namespace {

CommandRegistration reg(
    "experiment mismatch",
    "int8 vs f32 worker weights: sample episodes with each, score every sampled token with the "
    "trainer's f32 policy; TV/KL and the fraction DPPO would mask",
    [](CLI::App& app) {
      auto o = std::make_shared<app::MismatchOptions>();
      app.add_option("--model", o->model, "model directory (e.g. <demo dir>/model-sft)")
          ->required();
      app.add_option("--data", o->data, "dataset directory (<split>.jsonl)")->required();
      app.add_option("--index", o->index, "BM25 index directory (default <data>/index)");
      app.add_option("--split", o->split, "questions to sample (train: what RL sees)")
          ->capture_default_str();
      app.add_option("--limit", o->limit, "episodes per precision")->capture_default_str();
      app.add_option("--temperature", o->temperature)->capture_default_str();
      app.add_option("--seed", o->seed)->capture_default_str();
      app.add_option("--max-turns", o->episode.max_turns)->capture_default_str();
      app.add_option("--max-new-tokens", o->episode.max_new_tokens)->capture_default_str();
      app.add_option("--max-observation-tokens", o->episode.max_observation_tokens)
          ->capture_default_str();
      app.add_option("--threads", o->threads, "libtorch threads for scoring")
          ->capture_default_str();
      app.add_option("--out", o->out, "output directory")->capture_default_str();
      return [o] { return app::run_mismatch(*o); };
    });

}  // namespace
}  // namespace stoa::cli
