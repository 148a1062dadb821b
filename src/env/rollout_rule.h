// One rule for what a rollout may be. The hub's intake (roles/hub/intake.cpp) and the trainer
// (train::validate_rollout, the trainer loop's check before a step) both call check_rollout, so
// whatever the hub accepts the trainer accepts: a rollout the trainer would refuse is refused at
// the door, with a stable reason code, instead of ending the run when its group reaches a step.
//
// Torch-free and free of the hub's state: what depends on the run's history (leases, the lease's
// prompt, published versions, the staleness window, the reward recomputed from the transcript)
// stays in the hub; what a rollout must be on its own — shapes, vocabulary, flags, log-probs, the
// top-K report — is here.
#pragma once
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace stoa::env {

// Positive log-probs up to this tolerance are rounding noise of a log-softmax and read as 0;
// anything larger is a bug or a forgery.
constexpr float kLogprobTolerance = 1e-4f;
// The most log-probs a top-K row may report (the wire's bound, net::validate_structure).
constexpr int32_t kMaxTopk = 64;
// Exponentiated, a top-K row's log-probs are a part of a distribution: their sum may exceed 1 by
// this much (f32 log-softmax rounding over K terms), no more.
constexpr double kTopkMassTolerance = 1e-3;

// A rollout as both sides hold it, without copying: the hub's submission and the trainer's
// train::Rollout each make one of these.
struct RolloutView {
  std::string_view id;
  std::span<const int32_t> tokens;     // prompt, model tokens, tool observations
  std::span<const uint8_t> trainable;  // 1: sampled by the policy (trained on)
  std::span<const float> logprobs;     // behaviour log μ, read where trainable
  int32_t topk = 0;                    // K; topk_ids/topk_logprobs hold tokens × K values
  std::span<const int32_t> topk_ids;
  std::span<const float> topk_logprobs;
  std::optional<double> reward;  // checked when present (the hub computes its own later)
};

// The view of a rollout as the wire and the hub's ledger hold it (net::RolloutSubmission,
// hub::AcceptedRollout: `mask` and `logprobs` per token).
template <typename WireRollout>
RolloutView wire_rollout_view(const WireRollout& r) {
  return RolloutView{r.id,   r.tokens,   r.mask,          r.logprobs,
                     r.topk, r.topk_ids, r.topk_logprobs, std::nullopt};
}

// What the run allows.
struct RolloutLimits {
  int64_t vocab_size = 0;
  int64_t max_tokens = 0;  // 0: no limit
  // The run's K: every rollout reports exactly this many top-K log-probs per token (0: none).
  // nullopt: any K in [0, kMaxTopk] (a trainer given rollouts outside a run: tests, benches).
  std::optional<int32_t> topk;
};

// Why a rollout is refused: `reason` is a stable code (docs/protocol.md lists them), `detail`
// names the token and what is wrong with it.
struct RolloutRejection {
  std::string reason;
  std::string detail;
};

// Every reason check_rollout can give, in the order it checks them.
inline constexpr std::string_view kRolloutRuleReasons[] = {"too_short",
                                                           "too_long",
                                                           "bad_shape",
                                                           "bad_token_id",
                                                           "first_token_generated",
                                                           "bad_logprob",
                                                           "no_generated_tokens",
                                                           "topk_mismatch",
                                                           "bad_topk",
                                                           "bad_reward"};

// nullopt when the rollout may be trained on; the first thing wrong otherwise. The detail does
// not name the rollout: callers put it in front (the hub's "rollout <id>", the trainer's
// "rollout '<id>' of group '<g>'").
std::optional<RolloutRejection> check_rollout(const RolloutView& rollout,
                                              const RolloutLimits& limits);

}  // namespace stoa::env
