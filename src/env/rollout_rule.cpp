#include "env/rollout_rule.h"

#include <cmath>

#include "core/error.h"

namespace stoa::env {
namespace {

bool bad_logprob(float v) {
  return !std::isfinite(v) || v > kLogprobTolerance;
}

template <typename... Parts>
std::optional<RolloutRejection> refuse(std::string reason, Parts&&... parts) {
  return RolloutRejection{std::move(reason), cat(std::forward<Parts>(parts)...)};
}

// The top-K report: K the run's, the arrays tokens × K long, and every row of a generated token
// a valid part of a distribution that contains the sampled token.
std::optional<RolloutRejection> check_topk(const RolloutView& r, const RolloutLimits& limits) {
  const size_t n = r.tokens.size();
  if (r.topk < 0 || r.topk > kMaxTopk) {
    return refuse("topk_mismatch", "topk ", r.topk, " outside [0, ", kMaxTopk, "]");
  }
  if (limits.topk && r.topk != *limits.topk) {
    return refuse("topk_mismatch", "reports top-", r.topk, " log-probs; the run asks for top-",
                  *limits.topk);
  }
  const size_t k = static_cast<size_t>(r.topk);
  if (r.topk_ids.size() != n * k || r.topk_logprobs.size() != n * k) {
    return refuse("bad_topk", r.topk_ids.size(), " top-K ids and ", r.topk_logprobs.size(),
                  " top-K log-probs; expected ", n * k, " (", n, " tokens x ", k, ")");
  }
  if (k == 0) return std::nullopt;
  for (size_t t = 0; t < n; ++t) {
    if (!r.trainable[t]) continue;
    bool has_sampled = false;
    double mass = 0.0;
    for (size_t j = 0; j < k; ++j) {
      const int32_t id = r.topk_ids[t * k + j];
      const float lp = r.topk_logprobs[t * k + j];
      if (id < 0 || id >= limits.vocab_size) {
        return refuse("bad_topk", "top-K id ", j, " of token ", t, " is ", id,
                      ", outside the vocabulary [0, ", limits.vocab_size, ")");
      }
      if (bad_logprob(lp)) {
        return refuse("bad_topk", "top-K log-prob ", j, " of token ", t, " is ", lp,
                      " (must be finite and <= 0)");
      }
      for (size_t i = 0; i < j; ++i) {
        if (r.topk_ids[t * k + i] == id) {
          return refuse("bad_topk", "top-K row of token ", t, " repeats id ", id);
        }
      }
      has_sampled |= id == r.tokens[t];
      mass += std::exp(static_cast<double>(lp));
    }
    if (!has_sampled) {
      return refuse("bad_topk", "top-K row of token ", t, " lacks the sampled token ", r.tokens[t]);
    }
    if (mass > 1.0 + kTopkMassTolerance) {
      return refuse("bad_topk", "top-K probabilities of token ", t, " sum to ", mass, " > 1");
    }
  }
  return std::nullopt;
}

}  // namespace

std::optional<RolloutRejection> check_rollout(const RolloutView& r, const RolloutLimits& limits) {
  const size_t n = r.tokens.size();
  // A prompt token and a generated one at least: nothing predicts the first token.
  if (n < 2) {
    return refuse("too_short", "has ", n,
                  " tokens; a rollout needs a prompt token and a generated token");
  }
  if (limits.max_tokens > 0 && static_cast<int64_t>(n) > limits.max_tokens) {
    return refuse("too_long", n, " tokens exceed the limit ", limits.max_tokens);
  }
  if (r.trainable.size() != n || r.logprobs.size() != n) {
    return refuse("bad_shape", n, " tokens but ", r.trainable.size(), " trainable flags and ",
                  r.logprobs.size(), " log-probs");
  }
  for (size_t t = 0; t < n; ++t) {
    if (r.trainable[t] > 1) {
      return refuse("bad_shape", "trainable flag of token ", t, " is ", int(r.trainable[t]),
                    " (0 or 1)");
    }
    const int32_t id = r.tokens[t];
    if (id < 0 || id >= limits.vocab_size) {
      return refuse("bad_token_id", "token ", t, " has id ", id, ", outside the vocabulary [0, ",
                    limits.vocab_size, ")");
    }
  }
  if (r.trainable[0]) {
    return refuse("first_token_generated", "token 0 is marked generated, but nothing predicts it");
  }
  size_t generated = 0;
  for (size_t t = 0; t < n; ++t) {
    if (!r.trainable[t]) continue;
    ++generated;
    const float lp = r.logprobs[t];
    if (!std::isfinite(lp)) {
      return refuse("bad_logprob", "behaviour log-prob of token ", t, " is not finite (", lp, ")");
    }
    if (lp > kLogprobTolerance) {
      return refuse("bad_logprob", "behaviour log-prob of token ", t, " is positive (", lp, ")");
    }
  }
  if (generated == 0) {
    return refuse("no_generated_tokens", "has no trainable (model-generated) tokens");
  }
  if (auto topk = check_topk(r, limits)) return topk;
  if (r.reward && !std::isfinite(*r.reward)) {
    return refuse("bad_reward", "reward is not finite (", *r.reward, ")");
  }
  return std::nullopt;
}

}  // namespace stoa::env
