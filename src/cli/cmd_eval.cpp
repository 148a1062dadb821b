// `stoa eval`: pass@1 of a model on a PaperSearchQA-style split, running the full multi-turn
// Search-R1 episode (env::Episode + SearchTask against the local BM25 index) on the engine.
// Torch-free: what a worker runs, so the number measures the weights workers actually use
// (--int8) or their f32 source.
//
// Episodes are advanced in a batch (ModelRunner::append_batch reads the weights once per pass
// for every active episode); a finished episode's slot takes the next question, so the batch
// stays full. Greedy by default (temperature 0): pass@1 of the policy's mode, reproducible.
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
#include "env/tasks/search/bm25_index.h"
#include "env/tasks/search/search_task.h"
#include "env/token_codec.h"
#include "env/tokenizer_codec.h"
#include "model/tokenizer.h"
#include "model/weights.h"

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

struct Slot {
  size_t item = 0;
  std::unique_ptr<env::Episode> ep;
  std::unique_ptr<engine::Sequence> seq;
  std::unique_ptr<engine::Sampler> sampler;
  std::vector<int32_t> pending;      // to append in the next pass
  std::vector<int32_t> turn;         // this turn's generated tokens
  std::vector<float> turn_logprobs;  // their log-probs under the sampling distribution (μ)
  std::vector<float> mu;             // aligned with ep->tokens(): μ of generated tokens, else 0
  int64_t fed = 0;                   // ep->tokens() already in seq
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
  // The model's own tokenizer when it has one; a byte-level codec for tokenizer-less test
  // models (ids 0..255 must then be in the vocabulary).
  std::unique_ptr<env::TokenCodec> codec;
  // Ids past the codec's vocabulary decode to nothing, so sampling is restricted to the ids the
  // codec knows (a model's embedding table is often padded past its tokenizer).
  int64_t sample_vocab = config.vocab_size;
  const std::string tok_path = o.model + "/tokenizer.json";
  if (std::filesystem::exists(tok_path)) {
    Tokenizer tok = Tokenizer::from_file(tok_path);
    STOA_CHECK(tok.vocab_size() <= config.vocab_size, ErrorKind::kBadFormat, "eval: tokenizer ",
               tok_path, " has ", tok.vocab_size(), " tokens but the model's vocabulary is ",
               config.vocab_size);
    sample_vocab = tok.vocab_size();
    codec = std::make_unique<env::TokenizerCodec>(std::move(tok));
  } else {
    STOA_CHECK(config.vocab_size >= 256, ErrorKind::kBadFormat, "eval: ", o.model,
               " has no tokenizer.json and a vocabulary under 256 (byte-level fallback)");
    codec = std::make_unique<env::ByteCodec>();
    sample_vocab = 256;
  }
  engine::ModelRunner runner = engine::ModelRunner::from_model(
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
  size_t next = 0;
  std::vector<Slot> slots;
  auto fill = [&](Slot& s) -> bool {
    if (next >= items.size()) return false;
    s = Slot{};
    s.item = next++;
    s.ep = std::make_unique<env::Episode>(task, items[s.item], *codec, ec);
    s.seq = std::make_unique<engine::Sequence>(runner.new_sequence(capacity));
    s.sampler = std::make_unique<engine::Sampler>(sp, o.seed, s.item);
    s.pending = s.ep->tokens();
    s.mu.assign(s.pending.size(), 0.0f);
    return true;
  };
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
  auto finish = [&](Slot& s) {
    reward[s.item] = s.ep->reward();
    if (transcripts.is_open()) {
      nlohmann::json t = {{"id", items[s.item].id},
                          {"question", items[s.item].question},
                          {"golden_answers", items[s.item].golden_answers},
                          {"response", s.ep->response_text()},
                          {"reward", reward[s.item]}};
      transcripts << t.dump() << '\n';
    }
    if (rollouts.is_open()) {
      // The episode's transcript is exactly what was sampled plus the tool observations (the
      // worker checks the same), so μ lines up token for token with the loss mask.
      STOA_CHECK(s.mu.size() == s.ep->tokens().size(), ErrorKind::kInternal, "eval: item '",
                 items[s.item].id, "': ", s.mu.size(), " log-probs for ", s.ep->tokens().size(),
                 " tokens");
      nlohmann::json r = {{"id", items[s.item].id},
                          {"tokens", s.ep->tokens()},
                          {"mask", s.ep->loss_mask()},
                          {"mu_logprobs", s.mu},
                          {"reward", reward[s.item]}};
      rollouts << r.dump() << '\n';
    }
    turns[s.item] = s.ep->turns();
    answered[s.item] = s.ep->response_text().find("<answer>") != std::string::npos;
  };
  for (int b = 0; b < o.batch; b++) {
    Slot s;
    if (!fill(s)) break;
    slots.push_back(std::move(s));
  }
  while (!slots.empty()) {
    std::vector<engine::SequenceInput> inputs;
    for (auto& s : slots) inputs.push_back({s.seq.get(), s.pending, engine::Logits::kLast});
    const engine::PassLogits logits = runner.append_batch_view(inputs);
    std::vector<Slot> keep;
    for (size_t i = 0; i < slots.size(); i++) {
      Slot& s = slots[i];
      s.fed += static_cast<int64_t>(s.pending.size());
      const engine::SampledToken sampled =
          s.sampler->sample(logits.last(i).first(static_cast<size_t>(sample_vocab)));
      const int32_t tok = sampled.token;
      s.turn.push_back(tok);
      s.turn_logprobs.push_back(sampled.logprob);
      generated++;
      const bool stop = tok == eos ||
                        s.ep->stop_position(codec->decode(s.turn)) != std::string::npos ||
                        static_cast<int>(s.turn.size()) >= o.max_new_tokens;
      bool done = false;
      if (stop) {
        env::Decision d = s.ep->step(s.turn);
        s.mu.insert(s.mu.end(), s.turn_logprobs.begin(), s.turn_logprobs.end());
        s.mu.resize(s.ep->tokens().size(), 0.0f);  // the observation (or nothing) after the turn
        s.turn.clear();
        s.turn_logprobs.clear();
        done = d.done;
        if (!done) {
          const auto& all = s.ep->tokens();
          s.pending.assign(all.begin() + s.fed, all.end());
        }
      } else {
        s.pending = {tok};
      }
      // Out of context: the episode ends where it is (its reward is whatever it has answered).
      if (!done && s.seq->remaining() < static_cast<int64_t>(s.pending.size()) + 1) {
        overflow[s.item] = 1;
        done = true;
      }
      if (done) {
        finish(s);
        if (!fill(s)) continue;
      }
      keep.push_back(std::move(s));
    }
    slots = std::move(keep);
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
