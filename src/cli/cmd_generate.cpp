// `stoa generate`: run the reference engine on a Hugging Face model directory (config.json,
// *.safetensors, tokenizer.json) or, with no --model, on the embedded tiny model.
#include <cstdio>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "core/error.h"
#include "engine/embedded_model.h"
#include "engine/generate.h"
#include "engine/model_runner.h"
#include "model/tokenizer.h"
#include "model/weights.h"

namespace stoa::cli {
namespace {

struct Options {
  std::string model;
  std::string prompt = "The protein";
  int64_t max_tokens = 64;
  double temperature = 0.8;
  double top_p = 1.0;
  int64_t top_k = 0;
  int64_t top_logprobs = 0;
  uint64_t seed = 0;
  bool f32 = false;
  bool json = false;
};

int run(const Options& o) {
  ModelWeights weights;
  Tokenizer tokenizer = [&] {
    if (o.model.empty()) {
      engine::EmbeddedModel m = engine::load_embedded_model();
      weights = std::move(m.weights);
      if (!o.json)
        std::fprintf(stderr, "stoa: no --model given; using %s\n", m.description.c_str());
      return m.tokenizer;
    }
    weights = load_model_dir(o.model);
    return Tokenizer::from_file(o.model + "/tokenizer.json");
  }();
  STOA_CHECK(tokenizer.vocab_size() <= weights.config.vocab_size, ErrorKind::kBadFormat,
             "tokenizer ", tokenizer.source(), " has ", tokenizer.vocab_size(),
             " tokens but the model's vocabulary is ", weights.config.vocab_size);
  const engine::WeightFormat format =
      o.f32 ? engine::WeightFormat::kF32 : engine::WeightFormat::kInt8;
  engine::ModelRunner runner = engine::ModelRunner::from_model(weights, format);
  weights = ModelWeights();  // the engine holds its own copy

  std::vector<int32_t> prompt = tokenizer.encode(o.prompt, /*add_special_tokens=*/true);
  STOA_CHECK(!prompt.empty(), ErrorKind::kInvalidArgument, "the prompt encodes to no tokens");
  engine::GenerateOptions g;
  g.max_tokens = o.max_tokens;
  g.sampling.temperature = o.temperature;
  g.sampling.top_p = o.top_p;
  g.sampling.top_k = o.top_k;
  g.sampling.top_logprobs = o.top_logprobs;
  g.seed = o.seed;
  if (runner.config().eos_token_id >= 0) {
    g.stop_tokens.push_back(static_cast<int32_t>(runner.config().eos_token_id));
  }
  engine::Sequence seq =
      runner.new_sequence(static_cast<int64_t>(prompt.size()) + std::max<int64_t>(o.max_tokens, 0));

  if (!o.json) {
    std::fwrite(o.prompt.data(), 1, o.prompt.size(), stdout);
    std::fflush(stdout);
  }
  engine::GenerationResult r =
      engine::generate(runner, seq, prompt, g, [&](const engine::SampledToken& t) {
        if (o.json) return;
        // Raw bytes: a character split over two tokens is completed by the next write.
        std::string bytes = tokenizer.decode_bytes(std::span<const int32_t>(&t.token, 1), true);
        std::fwrite(bytes.data(), 1, bytes.size(), stdout);
        std::fflush(stdout);
      });
  const double decode_rate = r.decode_seconds > 0 ? r.tokens.size() / r.decode_seconds : 0;
  if (o.json) {
    nlohmann::json out;
    out["prompt_ids"] = prompt;
    out["ids"] = r.tokens;
    out["logprobs"] = r.logprobs;
    out["text"] = tokenizer.decode(r.tokens, /*skip_special_tokens=*/true);
    out["stopped"] = r.stopped;
    out["weights"] = engine::weight_format_name(format);
    if (o.top_logprobs > 0) {
      nlohmann::json top = nlohmann::json::array();
      for (const auto& step : r.top) {
        nlohmann::json row = nlohmann::json::array();
        for (const engine::TokenLogprob& t : step) row.push_back({t.token, t.logprob});
        top.push_back(row);
      }
      out["top_logprobs"] = top;
    }
    out["prefill_seconds"] = r.prefill_seconds;
    out["decode_tokens_per_second"] = decode_rate;
    std::printf("%s\n", out.dump().c_str());
  } else {
    std::printf("\n");
    std::fprintf(stderr, "stoa: %zu prompt tokens in %.3f s, %zu generated at %.1f tokens/s (%s)\n",
                 prompt.size(), r.prefill_seconds, r.tokens.size(), decode_rate,
                 engine::weight_format_name(format));
  }
  return 0;
}

CommandRegistration reg(
    "generate",
    "Generate text with the reference engine. Without --model it runs the EMBEDDED tiny model: "
    "a small LFM2 with seeded random weights and a BPE tokenizer trained at start-up on a "
    "built-in biomedical paragraph, so its output is word salad (the demo swaps in a trained "
    "model).",
    [](CLI::App& app) {
      auto o = std::make_shared<Options>();
      app.add_option("--model", o->model,
                     "Hugging Face model directory (config.json, *.safetensors, tokenizer.json); "
                     "omit for the embedded tiny random model");
      app.add_option("--prompt", o->prompt, "prompt text")->capture_default_str();
      app.add_option("--max-tokens", o->max_tokens, "tokens to generate")
          ->capture_default_str()
          ->check(CLI::NonNegativeNumber);
      app.add_option("--temperature", o->temperature, "sampling temperature; 0 is greedy")
          ->capture_default_str()
          ->check(CLI::NonNegativeNumber);
      app.add_option("--top-p", o->top_p, "nucleus sampling mass in (0, 1]")->capture_default_str();
      app.add_option("--top-k", o->top_k, "keep the k most likely tokens; 0 keeps all")
          ->capture_default_str()
          ->check(CLI::NonNegativeNumber);
      app.add_option("--top-logprobs", o->top_logprobs,
                     "with --json, report this many (id, log-prob) pairs per token")
          ->check(CLI::NonNegativeNumber);
      app.add_option("--seed", o->seed, "sampler seed")->capture_default_str();
      auto* f32 = app.add_flag("--f32", o->f32, "compute with f32 weights");
      app.add_flag(
             "--int8", [o](int64_t) { o->f32 = false; },
             "compute with int8 weights (the default; GGUF Q8_0's grid)")
          ->excludes(f32);
      app.add_flag("--json", o->json,
                   "print one JSON object: prompt ids, generated ids, their log-probs under the "
                   "sampling distribution, text");
      return [o] { return run(*o); };
    });

}  // namespace
}  // namespace stoa::cli
