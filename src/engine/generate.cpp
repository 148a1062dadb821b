#include "engine/generate.h"

#include <algorithm>
#include <chrono>

#include "core/error.h"

namespace stoa::engine {
namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

GenerationResult generate(ModelRunner& runner, Sequence& seq, std::span<const int32_t> prompt,
                          const GenerateOptions& options,
                          const std::function<void(const SampledToken&)>& on_token) {
  STOA_CHECK(options.max_tokens >= 0, ErrorKind::kInvalidArgument, "max_tokens must be >= 0, got ",
             options.max_tokens);
  STOA_CHECK(
      !prompt.empty(), ErrorKind::kInvalidArgument,
      "generation needs a non-empty prompt (the next-token logits come from its last token)");
  STOA_CHECK(static_cast<int64_t>(prompt.size()) + options.max_tokens <= seq.remaining(),
             ErrorKind::kInvalidArgument, "a prompt of ", prompt.size(), " tokens plus ",
             options.max_tokens, " new ones do not fit the sequence (", seq.remaining(),
             " of capacity ", seq.capacity(), " left)");
  Sampler sampler(options.sampling, options.seed, options.stream, options.draw);
  GenerationResult result;
  auto start = std::chrono::steady_clock::now();
  Tensor logits = runner.append(seq, prompt, Logits::kLast);
  result.prefill_seconds = seconds_since(start);
  start = std::chrono::steady_clock::now();
  const int64_t V = runner.config().vocab_size;
  for (int64_t i = 0; i < options.max_tokens; ++i) {
    SampledToken t =
        sampler.sample(std::span<const float>(logits.as<float>(), static_cast<size_t>(V)),
                       static_cast<uint64_t>(seq.length()));
    result.tokens.push_back(t.token);
    result.logprobs.push_back(t.logprob);
    if (options.sampling.top_logprobs > 0) result.top.push_back(t.top);
    if (on_token) on_token(t);
    result.stopped = std::find(options.stop_tokens.begin(), options.stop_tokens.end(), t.token) !=
                     options.stop_tokens.end();
    // Every sampled token enters the state, the last one too: a rollout continues from here
    // (a tool observation, the next turn) without re-feeding anything.
    const bool last = result.stopped || i + 1 == options.max_tokens;
    const int32_t id = t.token;
    logits =
        runner.append(seq, std::span<const int32_t>(&id, 1), last ? Logits::kNone : Logits::kLast);
    if (result.stopped) break;
  }
  result.decode_seconds = seconds_since(start);
  return result;
}

}  // namespace stoa::engine
