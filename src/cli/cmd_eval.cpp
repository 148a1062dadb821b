// `stoa eval`: pass@1 of a model on a PaperSearchQA-style split, running the full multi-turn
// Search-R1 episode (env::Episode + SearchTask against the local BM25 index) on the engine.
// Torch-free: what a worker runs, so the number measures the weights workers actually use
// (--int8) or their f32 source.
//
// Episodes are advanced in a batch by the EpisodeRunner (one forward pass per step for every
// running episode); a finished episode's slot takes the next question, so the batch stays full.
// Greedy by default (temperature 0): pass@1 of the policy's mode, reproducible.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>

#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "core/error.h"
#include "engine/model_runner.h"
#include "engine/sampler.h"
#include "env/dataset.h"
#include "env/episode.h"
#include "env/model_codec.h"
#include "env/tasks/search/bm25_index.h"
#include "env/tasks/search/search_task.h"
#include "env/token_codec.h"
#include "model/weights.h"
#include "roles/episode/episode_runner.h"

namespace stoa::cli {
namespace {

struct Options {
  std::string model;
  std::string data;
  std::string index;  // default <data>/index
  std::string split = "validation";
  std::string questions;  // a QA JSONL file instead of <data>/<split>.jsonl
  int64_t limit = 0;      // 0: all
  bool int8 = false;
  int batch = 16;
  double temperature = 0.0;
  uint64_t seed = 0;
  int max_turns = 4;
  int max_new_tokens = 256;
  int max_observation_tokens = 500;
  int topk_docs = 3;
  std::string json_out;     // also write the summary here
  std::string transcripts;  // JSONL: one line per question (id, golden, response, reward)
  std::string rollouts;     // JSONL: tokens, loss mask and the sampled tokens' log μ per episode
};

// Per episode (by runner id): its question and the log-probs of its turn in progress.
struct Running {
  size_t item = 0;
  std::vector<float> turn_logprobs;  // this turn's sampled tokens' log-probs (μ)
  std::vector<float> mu;             // aligned with the episode's tokens: μ of generated, else 0
};

int run(const Options& o) {
  STOA_CHECK(o.batch >= 1, ErrorKind::kInvalidArgument, "eval: --batch must be >= 1");
  STOA_CHECK(o.max_new_tokens >= 1, ErrorKind::kInvalidArgument,
             "eval: --max-new-tokens must be >= 1");
  const auto t0 = std::chrono::steady_clock::now();
  const std::string qa_path = o.questions.empty() ? o.data + "/" + o.split + ".jsonl" : o.questions;
  STOA_CHECK(std::filesystem::exists(qa_path), ErrorKind::kNotFound, "eval: no questions file ",
             qa_path);
  std::vector<env::QaItem> items = env::load_qa(qa_path, env::BadLinePolicy::kFatal);
  if (o.limit > 0 && static_cast<int64_t>(items.size()) > o.limit) items.resize(o.limit);
  STOA_CHECK(!items.empty(), ErrorKind::kInvalidArgument, "eval: ", qa_path, " has no questions");

  ModelWeights weights = load_model_dir(o.model);
  const ModelConfig config = weights.config;
  // The workers' rule (env/model_codec.h): what is scored is what a worker would generate.
  env::ModelCodec model_codec = env::load_model_codec(o.model, config, "eval");
  const std::unique_ptr<env::TokenCodec> codec = std::move(model_codec.codec);
  const int64_t sample_vocab = model_codec.sample_vocab;
  engine::ModelRunner model = engine::ModelRunner::from_model(
      weights, o.int8 ? engine::WeightFormat::kInt8 : engine::WeightFormat::kF32);
  weights = ModelWeights();

  const std::string index_dir = o.index.empty() ? o.data + "/index" : o.index;
  env::Bm25Index index(index_dir);
  env::SearchTask task(index, o.topk_docs);
  env::EpisodeConfig ec;
  ec.max_turns = o.max_turns;
  ec.max_observation_tokens = o.max_observation_tokens;
  engine::SamplingParams sp;
  sp.temperature = o.temperature;
  engine::validate_sampling_params(sp);
  const int32_t eos = static_cast<int32_t>(config.eos_token_id);
  const int64_t capacity = config.max_position_embeddings;

  std::vector<double> reward(items.size(), 0.0);
  std::vector<int> turns(items.size(), 0);
  std::vector<uint8_t> answered(items.size(), 0), overflow(items.size(), 0);
  int64_t generated = 0;
  std::ofstream transcripts;
  if (!o.transcripts.empty()) {
    transcripts.open(o.transcripts);
    STOA_CHECK(transcripts.good(), ErrorKind::kIo, "eval: cannot write ", o.transcripts);
  }
  std::ofstream rollouts;
  if (!o.rollouts.empty()) {
    rollouts.open(o.rollouts);
    STOA_CHECK(rollouts.good(), ErrorKind::kIo, "eval: cannot write ", o.rollouts);
  }
  std::vector<Running> running(static_cast<size_t>(o.batch));
  auto finish = [&](const Running& s, const env::Episode& ep) {
    reward[s.item] = ep.reward();
    if (transcripts.is_open()) {
      nlohmann::json t = {{"id", items[s.item].id},
                          {"question", items[s.item].question},
                          {"golden_answers", items[s.item].golden_answers},
                          {"response", ep.response_text()},
                          {"reward", reward[s.item]}};
      transcripts << t.dump() << '\n';
    }
    if (rollouts.is_open()) {
      // The episode's transcript is exactly what was sampled plus the tool observations (the
      // worker checks the same), so μ lines up token for token with the loss mask.
      STOA_CHECK(s.mu.size() == ep.tokens().size(), ErrorKind::kInternal, "eval: item '",
                 items[s.item].id, "': ", s.mu.size(), " log-probs for ", ep.tokens().size(),
                 " tokens");
      nlohmann::json r = {{"id", items[s.item].id},
                          {"tokens", ep.tokens()},
                          {"mask", ep.loss_mask()},
                          {"mu_logprobs", s.mu},
                          {"reward", reward[s.item]}};
      rollouts << r.dump() << '\n';
    }
    turns[s.item] = ep.turns();
    answered[s.item] = ep.response_text().find("<answer>") != std::string::npos;
  };
  episode::RunnerLimits limits;
  limits.slots = o.batch;
  limits.capacity = capacity;
  limits.sample_vocab = sample_vocab;
  limits.preallocate = false;  // the model's whole context per slot would be wasted
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
    const Running& s = running[static_cast<size_t>(f.id)];
    // A score over episodes the task could not run would be wrong: stop and say why.
    STOA_CHECK(f.end != episode::EpisodeEnd::kTaskFailed, ErrorKind::kNetwork,
               "eval: the task failed: ", f.failure);
    // Out of context: the episode ends where it is (its reward is whatever it has answered).
    if (f.end == episode::EpisodeEnd::kOverflow) overflow[s.item] = 1;
    finish(s, *f.episode);
  };
  episode::EpisodeRunner runner(model, *codec, std::move(limits), std::move(hooks));
  size_t next = 0;
  auto fill = [&] {
    while (next < items.size() && runner.free_slots() > 0) {
      const size_t item = next++;
      episode::EpisodeSampling es;
      es.params = sp;
      es.seed = o.seed;
      es.stream = item;
      es.max_new_tokens = o.max_new_tokens;
      auto ep = std::make_unique<env::Episode>(task, items[item], *codec, ec);
      Running r;
      r.item = item;
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

  double correct = 0, turn_sum = 0, answered_n = 0, overflow_n = 0;
  for (size_t i = 0; i < items.size(); i++) {
    correct += reward[i];
    turn_sum += turns[i];
    answered_n += answered[i];
    overflow_n += overflow[i];
  }
  const double n = static_cast<double>(items.size());
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  nlohmann::json j = {{"model", o.model},
                      {"split", o.questions.empty() ? o.split : o.questions},
                      {"questions", items.size()},
                      {"pass1", correct / n},
                      {"correct", correct},
                      {"answered_fraction", answered_n / n},
                      {"mean_turns", turn_sum / n},
                      {"context_overflows", overflow_n},
                      {"tokens_generated", generated},
                      {"weights", o.int8 ? "int8" : "f32"},
                      {"temperature", o.temperature},
                      {"seconds", seconds}};
  const std::string out = j.dump(2);
  std::printf("%s\n", out.c_str());
  if (!o.json_out.empty()) {
    std::ofstream f(o.json_out);
    STOA_CHECK(f.good(), ErrorKind::kIo, "eval: cannot write ", o.json_out);
    f << out << '\n';
  }
  return 0;
}

CommandRegistration eval_cmd(
    "eval", "pass@1 of a model on a search-QA split (multi-turn episodes, local index)",
    [](CLI::App& app) {
      auto o = std::make_shared<Options>();
      app.add_option("--model", o->model, "model directory (config.json, safetensors)")->required();
      app.add_option("--data", o->data, "dataset directory (<split>.jsonl)")->required();
      app.add_option("--index", o->index, "BM25 index directory (default <data>/index)");
      app.add_option("--split", o->split, "split to evaluate (validation, test, train)");
      app.add_option("--questions", o->questions,
                     "a QA JSONL file to evaluate instead of <data>/<split>.jsonl (e.g. the "
                     "train questions `stoa data demos --hold-out` kept out of the SFT data)");
      app.add_option("--limit", o->limit, "evaluate only the first N questions (0: all)");
      app.add_flag("--int8", o->int8, "run the int8 (worker) weights instead of f32");
      app.add_option("--batch", o->batch, "episodes advanced together");
      app.add_option("--temperature", o->temperature, "sampling temperature (0: greedy)");
      app.add_option("--seed", o->seed, "sampling seed");
      app.add_option("--max-turns", o->max_turns, "tool turns before the final answer turn");
      app.add_option("--max-new-tokens", o->max_new_tokens, "tokens per turn");
      app.add_option("--max-observation-tokens", o->max_observation_tokens,
                     "observation budget per search");
      app.add_option("--json", o->json_out, "also write the JSON summary to this file");
      app.add_option("--transcripts", o->transcripts,
                     "write every episode (question, golden answers, response, reward) as JSONL");
      app.add_option("--rollouts", o->rollouts,
                     "write every episode's tokens, loss mask and sampled log-probs (mu) as JSONL "
                     "(what `stoa experiment mismatch` scores)");
      return [o] { return run(*o); };
    });

}  // namespace
}  // namespace stoa::cli
