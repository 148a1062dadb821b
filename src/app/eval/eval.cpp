// Episodes are advanced in a batch by the EpisodeRunner (one forward pass per step for every
// running episode); a finished episode's slot takes the next question, so the batch stays full.
#include "app/eval/eval.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <vector>

#include "app/eval/pass_at_k.h"
#include "core/error.h"
#include "engine/model_runner.h"
#include "engine/sampler.h"
#include "env/dataset.h"
#include "env/end_of_turn.h"
#include "env/episode.h"
#include "env/model_codec.h"
#include "env/tasks/builtin_tasks.h"
#include "env/token_codec.h"
#include "model/weights.h"
#include "roles/episode/episode_runner.h"

namespace stoa::app {
namespace {

// Per episode (by runner id): its question and the log-probs of its turn in progress.
struct Running {
  size_t item = 0;                   // the question
  size_t episode = 0;                // the question's sample: item + sample * questions
  std::vector<float> turn_logprobs;  // this turn's sampled tokens' log-probs (μ)
  std::vector<float> mu;             // aligned with the episode's tokens: μ of generated, else 0
};

// Per question: what its episode ended with.
struct Outcome {
  double reward = 0;
  int turns = 0;
  bool answered = false;
  bool overflow = false;
};

std::ofstream open_output(const std::string& path) {
  std::ofstream out;
  if (path.empty()) return out;
  out.open(path);
  STOA_CHECK(out.good(), ErrorKind::kIo, "eval: cannot write ", path);
  return out;
}

std::vector<env::QaItem> load_questions(const EvalOptions& o) {
  const std::string path =
      o.questions.empty() ? o.data + "/" + eval_split(o) + ".jsonl" : o.questions;
  STOA_CHECK(std::filesystem::exists(path), ErrorKind::kNotFound, "eval: no questions file ", path);
  std::vector<env::QaItem> items = env::load_qa(path, env::BadLinePolicy::kFatal);
  if (o.limit > 0 && static_cast<int64_t>(items.size()) > o.limit) items.resize(o.limit);
  STOA_CHECK(!items.empty(), ErrorKind::kInvalidArgument, "eval: ", path, " has no questions");
  return items;
}

// n of the estimator: asked for, or the largest k.
int samples_per_question(const EvalOptions& o) {
  int n = o.samples;
  if (n == 0) {
    n = 1;
    for (int k : o.pass_at) n = std::max(n, k);
  }
  STOA_CHECK(n >= 1, ErrorKind::kInvalidArgument, "eval: --samples must be >= 1");
  for (int k : o.pass_at)
    STOA_CHECK(k >= 1 && k <= n, ErrorKind::kInvalidArgument, "eval: --pass-at ", k,
               " needs 1 <= k <= --samples (", n, ")");
  STOA_CHECK(n == 1 || o.temperature > 0, ErrorKind::kInvalidArgument, "eval: ", n,
             " samples per question need --temperature > 0 (greedy samples are all the same)");
  return n;
}

}  // namespace

std::string eval_split(const EvalOptions& o) {
  if (!o.split.empty()) return o.split;
  if (!std::filesystem::exists(o.data + "/val.jsonl") &&
      std::filesystem::exists(o.data + "/validation.jsonl"))
    return "validation";
  return "val";
}

env::TaskOptions eval_task_options(const EvalOptions& o) {
  env::TaskOptions options = o.task_options;
  if (o.task == "search" && !options.has("index") && !options.has("search_url"))
    options.set("index", o.data + "/index");
  return options;
}

namespace {

// What evaluate() and evaluate_engine() check before any weights are touched: a misspelt task
// or option, a bad budget or a missing question file fails at once.
struct Prepared {
  int n_samples = 1;
  std::chrono::steady_clock::time_point t0;
  std::vector<env::QaItem> items;
  std::unique_ptr<env::Task> task;
};

Prepared prepare(const EvalOptions& o) {
  STOA_CHECK(o.batch >= 1, ErrorKind::kInvalidArgument, "eval: --batch must be >= 1");
  STOA_CHECK(o.max_new_tokens >= 1, ErrorKind::kInvalidArgument,
             "eval: --max-new-tokens must be >= 1");
  Prepared p;
  p.n_samples = samples_per_question(o);
  p.t0 = std::chrono::steady_clock::now();
  p.items = load_questions(o);
  p.task = env::make_task(o.task, eval_task_options(o));
  return p;
}

nlohmann::json run_episodes(const EvalOptions& o, Prepared prepared, engine::ModelRunner& model);

}  // namespace

nlohmann::json evaluate(const EvalOptions& o) {
  Prepared prepared = prepare(o);
  ModelWeights weights = load_model_dir(o.model);
  engine::ModelRunner model = engine::ModelRunner::from_model(
      weights, o.int8 ? engine::WeightFormat::kInt8 : engine::WeightFormat::kF32);
  weights = ModelWeights();
  return run_episodes(o, std::move(prepared), model);
}

nlohmann::json evaluate_engine(const EvalOptions& o, engine::ModelRunner& model) {
  return run_episodes(o, prepare(o), model);
}

namespace {

nlohmann::json run_episodes(const EvalOptions& o, Prepared prepared, engine::ModelRunner& model) {
  const int n_samples = prepared.n_samples;
  const auto t0 = prepared.t0;
  const std::vector<env::QaItem>& items = prepared.items;
  const std::unique_ptr<env::Task>& task = prepared.task;
  const ModelConfig& config = model.config();
  // The workers' rule (env/model_codec.h): what is scored is what a worker would generate.
  env::ModelCodec model_codec = env::load_model_codec(o.model, config, "eval");
  const std::unique_ptr<env::TokenCodec> codec = std::move(model_codec.codec);
  // The run's check too: a score over episodes that can only end at max_new_tokens would mislead.
  env::check_turns_end(*codec, config, task->stop_strings(), "eval");

  env::EpisodeConfig ec;
  ec.max_turns = o.max_turns;
  ec.max_observation_tokens = o.max_observation_tokens;
  engine::SamplingParams sp;
  sp.temperature = o.temperature;
  engine::validate_sampling_params(sp);

  // Episode e is question e % items, sample e / items: sample 0 keeps the seeds of a one-sample
  // eval.
  const size_t episodes = items.size() * static_cast<size_t>(n_samples);
  std::vector<Outcome> outcome(episodes);
  int64_t generated = 0;
  std::ofstream transcripts = open_output(o.transcripts);
  std::ofstream rollouts = open_output(o.rollouts);
  std::vector<Running> running(static_cast<size_t>(o.batch));
  auto finish = [&](const Running& s, const env::Episode& ep, bool overflow) {
    const env::QaItem& item = items[s.item];
    Outcome& out = outcome[s.episode];
    out.reward = ep.reward();
    out.turns = ep.turns();
    out.answered = ep.response_text().find("<answer>") != std::string::npos;
    out.overflow = overflow;
    if (transcripts.is_open()) {
      nlohmann::json t = {{"id", item.id},
                          {"question", item.question},
                          {"golden_answers", item.golden_answers},
                          {"sample", s.episode / items.size()},
                          {"response", ep.response_text()},
                          {"reward", out.reward}};
      transcripts << t.dump() << '\n';
    }
    if (rollouts.is_open()) {
      // The episode's transcript is exactly what was sampled plus the tool observations (the
      // worker checks the same), so μ lines up token for token with the loss mask.
      STOA_CHECK(s.mu.size() == ep.tokens().size(), ErrorKind::kInternal, "eval: item '", item.id,
                 "': ", s.mu.size(), " log-probs for ", ep.tokens().size(), " tokens");
      nlohmann::json r = {{"id", item.id},         {"sample", s.episode / items.size()},
                          {"tokens", ep.tokens()}, {"mask", ep.loss_mask()},
                          {"mu_logprobs", s.mu},   {"reward", out.reward}};
      rollouts << r.dump() << '\n';
    }
  };
  episode::RunnerLimits limits;
  limits.slots = o.batch;
  limits.capacity = config.max_position_embeddings;
  limits.sample_vocab = model_codec.sample_vocab;
  limits.preallocate = false;  // the model's whole context per slot would be wasted
  const int32_t eos = static_cast<int32_t>(config.eos_token_id);
  if (eos >= 0) limits.stop_tokens = {eos};
  episode::RunnerHooks hooks;
  hooks.on_token = [&](int64_t id, const engine::SampledToken& t) {
    running[static_cast<size_t>(id)].turn_logprobs.push_back(t.logprob);
    generated++;
  };
  hooks.on_turn = [&](int64_t id, const env::Episode& ep, const env::Decision&) {
    Running& s = running[static_cast<size_t>(id)];
    s.mu.insert(s.mu.end(), s.turn_logprobs.begin(), s.turn_logprobs.end());
    s.mu.resize(ep.tokens().size(), 0.0f);  // the observation (or nothing) after the turn
    s.turn_logprobs.clear();
  };
  hooks.on_end = [&](episode::FinishedEpisode&& f) {
    // A score over episodes the task could not run would be wrong: stop and say why.
    STOA_CHECK(f.end != episode::EpisodeEnd::kTaskFailed, ErrorKind::kNetwork,
               "eval: the task failed: ", f.failure);
    // Out of context: the episode ends where it is (its reward is whatever it has answered).
    finish(running[static_cast<size_t>(f.id)], *f.episode, f.end == episode::EpisodeEnd::kOverflow);
  };
  episode::EpisodeRunner runner(model, *codec, std::move(limits), std::move(hooks));
  size_t next = 0;
  auto fill = [&] {
    while (next < episodes && runner.free_slots() > 0) {
      const size_t episode = next++;
      const size_t item = episode % items.size();
      episode::EpisodeSampling es;
      es.params = sp;
      es.seed = o.seed;
      es.stream = episode;
      es.max_new_tokens = o.max_new_tokens;
      auto ep = std::make_unique<env::Episode>(*task, items[item], *codec, ec);
      Running r;
      r.item = item;
      r.episode = episode;
      r.mu.assign(ep->tokens().size(), 0.0f);  // the prompt
      const int64_t id = runner.start(std::move(ep), -1, es);
      running[static_cast<size_t>(id)] = std::move(r);
    }
  };
  fill();
  while (runner.running() > 0) {
    runner.step();
    fill();
  }

  double turn_sum = 0, answered = 0, overflows = 0;
  std::vector<std::vector<double>> rewards(items.size());
  for (size_t e = 0; e < episodes; ++e) {
    const Outcome& out = outcome[e];
    rewards[e % items.size()].push_back(out.reward);
    turn_sum += out.turns;
    answered += out.answered;
    overflows += out.overflow;
  }
  std::vector<int> ks = o.pass_at;
  ks.push_back(1);
  const RewardSummary summary = summarize_rewards(rewards, ks, o.success_reward);
  nlohmann::json pass_at = nlohmann::json::object();
  for (const auto& [k, v] : summary.pass_at) pass_at[std::to_string(k)] = v;
  int64_t successes = 0;
  for (const Outcome& out : outcome) successes += out.reward >= o.success_reward ? 1 : 0;
  const double n = static_cast<double>(episodes);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return {{"model", o.model},
          {"task", o.task},
          {"split", o.questions.empty() ? eval_split(o) : o.questions},
          {"questions", items.size()},
          {"samples_per_question", n_samples},
          {"mean_reward", summary.mean_reward},
          {"success_reward", o.success_reward},
          {"pass1", summary.pass_at.at(1)},
          {"pass_at", pass_at},
          {"successes", successes},
          {"answered_fraction", answered / n},
          {"mean_turns", turn_sum / n},
          {"context_overflows", overflows},
          {"tokens_generated", generated},
          {"weights", o.int8 ? "int8" : "f32"},
          {"temperature", o.temperature},
          {"seconds", seconds}};
}

}  // namespace
}  // namespace stoa::app
