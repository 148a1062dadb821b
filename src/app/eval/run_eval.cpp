#include "app/eval/run_eval.h"

#include <filesystem>
#include <utility>
#include <vector>

#include "core/jsonl.h"
#include "engine/model_runner.h"
#include "model/config.h"
#include "roles/episode/pulse_weights.h"

namespace stoa::app {

EvalOptions run_eval_options(const run::RunConfig& c) {
  EvalOptions o;
  o.model = c.model_dir;
  o.data = c.data_dir;
  o.questions = c.eval.questions;
  o.task = c.task;
  o.task_options = c.task_options;
  o.limit = c.eval.limit;
  o.int8 = true;  // the published view is int8, as every worker holds it
  o.batch = c.eval.batch;
  o.temperature = c.eval.temperature;
  o.samples = c.eval.samples;
  if (c.eval.pass_at > 1) o.pass_at = {c.eval.pass_at};
  o.success_reward = c.eval.success_reward;
  o.seed = c.eval.seed;
  o.max_turns = c.hub.sampling.max_turns;
  o.max_new_tokens = c.hub.sampling.max_new_tokens;
  o.max_observation_tokens = c.hub.sampling.max_observation_tokens;
  return o;
}

trainer::HeldOutEval held_out_eval(const run::RunConfig& c) {
  trainer::HeldOutEval e;
  e.every_steps = c.eval.every_steps;
  if (e.every_steps <= 0) return e;
  const EvalOptions options = run_eval_options(c);
  const std::string log_path = (std::filesystem::path(c.run_dir) / "eval.jsonl").string();
  e.evaluate = [options, log_path](int64_t step, uint64_t version, const pulse::Int8State& view) {
    const ModelConfig config = load_model_config(options.model + "/config.json");
    // The worker's own path from a PULSE state to engine weights: the numbers are the fleet's.
    engine::ModelRunner model(
        episode::engine_weights_from_state(config, {view.tensors().begin(), view.tensors().end()}));
    nlohmann::json summary = evaluate_engine(options, model);
    summary["step"] = step;
    summary["version"] = version;
    JsonlWriter log(log_path, JsonlWriter::Mode::kAppend);
    log.write(summary);
    log.flush();

    trainer::HeldOutResult r;
    r.split = summary.at("split").get<std::string>();
    r.questions = summary.at("questions").get<int64_t>();
    r.samples_per_question = summary.at("samples_per_question").get<int64_t>();
    r.mean_reward = summary.at("mean_reward").get<double>();
    for (const auto& [k, v] : summary.at("pass_at").items())
      r.pass_at[std::stoi(k)] = v.get<double>();
    r.seconds = summary.at("seconds").get<double>();
    return r;
  };
  return e;
}

}  // namespace stoa::app
