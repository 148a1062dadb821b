// Policy-loss configuration (torch-free). Every variant shares one per-token loss,
//   ℓ_t = −A_t · sg(min(p_t/μ_t, C)) · M_t · log p_t,
// and differs only in its trust-region mask M_t and ratio cap C (reference.md §1). Adding a
// variant is three local entries: its LossKind here, its mask in losses.cpp's table, and its name
// in train_options.cpp's kLossKindNames (from which the parser and its error message read).
#pragma once
#include <cstdint>
#include <limits>
#include <string>

#include "train/rollout.h"

namespace stoa::train {

enum class LossKind {
  kDppoBinaryTv,  // drop when p − μ leaves [−δ_lo, δ_hi] in the advantage's direction
  kDppoBinaryKl,  // drop when the Bernoulli KL(μ‖p) > δ and p moved in the advantage's direction
  kDppoTopkTv,    // as Binary-KL but with the TV over the worker's top-K ids + rest mass
  kDppoTopkKl,    // as Binary-KL but with the KL over the worker's top-K ids + rest mass
  kPpoClip,  // baseline: drop when p/μ leaves [1−ε_lo, 1+ε_hi] in the advantage's direction
  kTruncatedIs,  // baseline: no mask, ratio truncated at C
  kOnPolicyPg,   // baseline: plain policy gradient −A·log p (no ratio, no mask)
};
const char* loss_kind_name(LossKind kind);  // "dppo-binary-tv", ..., "on-policy-pg"
LossKind parse_loss_kind(const std::string& name);
bool loss_needs_topk(LossKind kind);

enum class Aggregation {
  kTokenMean,    // Σ ℓ_t / (number of trainable tokens in the batch)
  kSequenceSum,  // Σ ℓ_t / (sequence_constant · number of sequences) (Dr.GRPO / DPPO recipe)
};
const char* aggregation_name(Aggregation aggregation);
Aggregation parse_aggregation(const std::string& name);

// DPPO trust-region thresholds δ (reference.md): 0.15 on the total-variation scale, 0.05 on the
// binary-KL scale.
inline constexpr double kDppoTvDelta = 0.15;
inline constexpr double kDppoKlDelta = 0.05;

struct LossConfig {
  LossKind kind = LossKind::kDppoBinaryTv;
  double delta_hi = kDppoTvDelta;  // DPPO thresholds (the KL variants want kDppoKlDelta)
  double delta_lo = kDppoTvDelta;
  double clip_eps_hi = 0.2;  // PPO clip
  double clip_eps_lo = 0.2;
  // Ratio cap C. The DPPO recipe effectively disables it; the truncated-IS baseline needs it
  // finite (3–20 are common).
  double ratio_cap = std::numeric_limits<double>::infinity();
  AdvantageKind advantage = AdvantageKind::kDrGrpo;
  Aggregation aggregation = Aggregation::kTokenMean;
  double sequence_constant = 1024.0;  // kSequenceSum divisor, e.g. the max response length
  double kl_eps = 1e-12;              // inside the logs of the binary KL
};

// Throws kInvalidArgument naming the field for out-of-range values.
void validate_loss_config(const LossConfig& config);

}  // namespace stoa::train
