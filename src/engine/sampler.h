// Token sampling with temperature, top-k and top-p, seeded and deterministic. For every token
// it returns the log-probability under the distribution it was actually drawn from — after
// temperature, top-k and top-p truncation and renormalisation — because that is the behaviour
// policy DPPO's trust region compares the trainer's policy against. Greedy (temperature 0) is
// a point mass: log-prob 0.
//
// Order of operations (as in Hugging Face and vLLM): z = logits / T; keep the top_k largest z
// (ties to the lower id); keep the smallest prefix, by descending probability, whose mass
// reaches top_p; renormalise.
//
// One arithmetic on every machine (docs/design/verification.md, "The same bits everywhere"): the
// distribution and the draw are a pure function of (logit bits, params, seed, position). z is
// logit / T in double (IEEE division); the log-sum-exp is kernels::fixed_logsumexp over the
// support in its order (our own exp and log, a fixed 32-partial-sum order whatever the SIMD
// width); a log-prob is float(z - lse); top-p's running mass (normalised by the log-sum-exp of
// the support before the cut: in id order, or descending after top-k) and the draw's cumulative
// sum add kernels::fixed_exp values one by one in the distribution's order. No libm, no FMA.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "core/rng.h"

namespace stoa::engine {

struct SamplingParams {
  double temperature = 1.0;  // 0: greedy
  int64_t top_k = 0;         // 0: no top-k truncation
  double top_p = 1.0;        // 1: no nucleus truncation; must be in (0, 1]
  int64_t top_logprobs = 0;  // how many (id, log-prob) pairs of the distribution to report
};

// Throws kInvalidArgument naming the field for out-of-range settings.
void validate_sampling_params(const SamplingParams& params);

struct TokenLogprob {
  int32_t token = 0;
  float logprob = 0;
};

struct SampledToken {
  int32_t token = 0;
  float logprob = 0;              // under the truncated, renormalised distribution
  std::vector<TokenLogprob> top;  // its top_logprobs most likely tokens, most likely first
};

// The distribution sample() draws from: its support with log-probs (which sum, in probability,
// to 1), ordered by descending probability when truncation needed the order and by id
// otherwise.
std::vector<TokenLogprob> sampling_distribution(std::span<const float> logits,
                                                const SamplingParams& params);

// The sampler's stream s under a seed is Rng(seed, kSamplerStreamBase + s). The sampler mapped
// (seed, s) to seed ^ (s * Rng::kStreamMultiplier + 0x2545f4914f6cdd1d) before Rng was shared;
// this offset is that constant divided by the (odd, so invertible) multiplier modulo 2^64, so
// every seed draws the numbers, hence the rollouts, it always drew.
inline constexpr uint64_t kSamplerStreamBase = 0xaf5584f88af3f569ull;
static_assert(kSamplerStreamBase * Rng::kStreamMultiplier == 0x2545f4914f6cdd1dull);

// Positional draws (verifiable sampling, docs/design/verification.md): the uniform a token at
// transcript position `position` is drawn with is a pure function of (seed, position) — the first
// output of Rng(seed, kSamplerPositionBase + position) — so a validator that recomputes the
// distribution can recompute the draw, whatever happened before that position (turns, weight
// switches, other slots).
inline constexpr uint64_t kSamplerPositionBase = 0x5e1f0000'00000000ull;
double positional_uniform(uint64_t seed, uint64_t position);
// The entry of `dist` (sampling_distribution's order) that the uniform `u` picks: the first
// whose cumulative probability exceeds u (the last one if rounding leaves the total under u).
size_t pick_index(const std::vector<TokenLogprob>& dist, double u);

// How a sampler gets its uniforms: a running stream per (seed, stream) (stoa generate, eval), or
// positional draws (the worker's rollouts, which a validator replays).
enum class DrawMode { kStream, kPositional };

// The token the uniform `u` draws from `logits` under `params`, with its log-prob and top list.
// Sampler::sample is its draw() then this, so a machine given another's uniform (a pipeline's
// last stage: docs/design/pipeline.md) draws that machine's token, bit for bit.
SampledToken sample_with_uniform(std::span<const float> logits, const SamplingParams& params,
                                 double u);

class Sampler {
 public:
  Sampler(SamplingParams params, uint64_t seed, uint64_t stream = 0,
          DrawMode mode = DrawMode::kStream);

  // `position` is the index the token will have in its sequence; only positional draws read it.
  SampledToken sample(std::span<const float> logits, uint64_t position = 0);
  // The uniform sample() draws for a token at `position` (a stream sampler advances).
  double draw(uint64_t position = 0);
  const SamplingParams& params() const { return params_; }
  DrawMode mode() const { return mode_; }

 private:
  SamplingParams params_;
  Rng rng_;
  uint64_t seed_;
  DrawMode mode_;
};

}  // namespace stoa::engine
