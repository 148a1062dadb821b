// Autoregressive generation on one sequence: prefill the prompt, then sample and append one
// token at a time until a stop token or the token budget. The rollout workers build on this;
// `stoa generate` is its command-line face.
#pragma once
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "engine/model_runner.h"
#include "engine/sampler.h"

namespace stoa::engine {

struct GenerateOptions {
  int64_t max_tokens = 64;
  SamplingParams sampling;
  uint64_t seed = 0;
  uint64_t stream = 0;
  std::vector<int32_t> stop_tokens;  // generation ends after emitting one of these
  // kPositional: every token's draw is a function of (seed, its position) alone (the stream is
  // not used), so a validator can replay it (engine/sampler.h).
  DrawMode draw = DrawMode::kStream;
};

struct GenerationResult {
  std::vector<int32_t> tokens;                 // generated tokens (a stop token included)
  std::vector<float> logprobs;                 // per token, under the sampled distribution
  std::vector<std::vector<TokenLogprob>> top;  // per token, when sampling.top_logprobs > 0
  bool stopped = false;                        // ended on a stop token (not on the budget)
  double prefill_seconds = 0;
  double decode_seconds = 0;
};

// Continues `seq` (which may already hold state, e.g. a forked prompt) with `prompt`, then
// generates; afterwards `seq` holds the prompt and every generated token. on_token, if given, sees
// each token as it is sampled (for streaming output).
GenerationResult generate(ModelRunner& runner, Sequence& seq, std::span<const int32_t> prompt,
                          const GenerateOptions& options,
                          const std::function<void(const SampledToken&)>& on_token = {});

}  // namespace stoa::engine
