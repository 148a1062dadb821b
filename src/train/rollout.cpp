#include "train/rollout.h"

#include <cmath>

#include "core/enum_names.h"
#include "core/error.h"

namespace stoa::train {
namespace {

std::string rollout_name(const Rollout& rollout, const std::string& group_id) {
  std::string name = cat("rollout '", rollout.id.empty() ? "<no id>" : rollout.id, "'");
  if (!group_id.empty()) name += cat(" of group '", group_id, "'");
  return name;
}

}  // namespace

void validate_rollout(const Rollout& rollout, int64_t vocab_size, int64_t max_tokens,
                      const std::string& group_id) {
  const std::string name = rollout_name(rollout, group_id);
  const size_t n = rollout.tokens.size();
  auto bad = [&](auto&&... parts) { fail(ErrorKind::kInvalidArgument, name, ": ", parts...); };
  if (n < 2) bad("has ", n, " tokens; a rollout needs a prompt token and a generated token");
  if (max_tokens > 0 && static_cast<int64_t>(n) > max_tokens) {
    bad("has ", n, " tokens, more than the trainer's limit of ", max_tokens);
  }
  if (rollout.trainable.size() != n) {
    bad("has ", rollout.trainable.size(), " trainable flags for ", n, " tokens");
  }
  if (rollout.behaviour_logprobs.size() != n) {
    bad("has ", rollout.behaviour_logprobs.size(), " behaviour log-probs for ", n, " tokens");
  }
  for (size_t t = 0; t < n; ++t) {
    int32_t id = rollout.tokens[t];
    if (id < 0 || id >= vocab_size) {
      bad("token ", t, " has id ", id, ", outside the vocabulary [0, ", vocab_size, ")");
    }
    if (rollout.trainable[t] > 1) bad("trainable flag ", t, " is ", int(rollout.trainable[t]));
  }
  if (rollout.trainable[0]) bad("token 0 is marked trainable, but nothing predicts it");
  size_t trainable = 0;
  for (size_t t = 0; t < n; ++t) {
    if (!rollout.trainable[t]) continue;
    ++trainable;
    float lp = rollout.behaviour_logprobs[t];
    if (!std::isfinite(lp)) bad("behaviour log-prob of token ", t, " is not finite (", lp, ")");
    if (lp > kLogprobTolerance) bad("behaviour log-prob of token ", t, " is positive (", lp, ")");
  }
  if (trainable == 0) bad("has no trainable (model-generated) tokens");
  if (rollout.topk < 0) bad("topk is negative (", rollout.topk, ")");
  if (rollout.topk == 0) {
    if (!rollout.topk_ids.empty() || !rollout.topk_logprobs.empty()) {
      bad("has top-K values but topk = 0");
    }
    return;
  }
  const size_t k = static_cast<size_t>(rollout.topk);
  if (rollout.topk_ids.size() != n * k || rollout.topk_logprobs.size() != n * k) {
    bad("has ", rollout.topk_ids.size(), " top-K ids and ", rollout.topk_logprobs.size(),
        " top-K log-probs; expected ", n * k, " (", n, " tokens x ", k, ")");
  }
  for (size_t t = 0; t < n; ++t) {
    if (!rollout.trainable[t]) continue;
    bool has_sampled = false;
    double mass = 0.0;
    for (size_t j = 0; j < k; ++j) {
      int32_t id = rollout.topk_ids[t * k + j];
      float lp = rollout.topk_logprobs[t * k + j];
      if (id < 0 || id >= vocab_size) {
        bad("top-K id ", j, " of token ", t, " is ", id, ", outside the vocabulary [0, ",
            vocab_size, ")");
      }
      if (!std::isfinite(lp) || lp > kLogprobTolerance) {
        bad("top-K log-prob ", j, " of token ", t, " is ", lp, " (must be finite and <= 0)");
      }
      for (size_t i = 0; i < j; ++i) {
        if (rollout.topk_ids[t * k + i] == id) bad("top-K row of token ", t, " repeats id ", id);
      }
      has_sampled |= id == rollout.tokens[t];
      mass += std::exp(static_cast<double>(lp));
    }
    if (!has_sampled) bad("top-K row of token ", t, " lacks the sampled token ", rollout.tokens[t]);
    if (mass > 1.0 + 1e-3) bad("top-K probabilities of token ", t, " sum to ", mass, " > 1");
  }
}

void validate_groups(const std::vector<RolloutGroup>& groups, int64_t vocab_size,
                     int64_t max_tokens) {
  STOA_CHECK(!groups.empty(), ErrorKind::kInvalidArgument, "the rollout batch has no groups");
  for (const RolloutGroup& group : groups) {
    STOA_CHECK(!group.rollouts.empty(), ErrorKind::kInvalidArgument, "group '", group.id,
               "' has no rollouts");
    for (const Rollout& rollout : group.rollouts) {
      validate_rollout(rollout, vocab_size, max_tokens, group.id);
      STOA_CHECK(std::isfinite(rollout.reward), ErrorKind::kInvalidArgument,
                 rollout_name(rollout, group.id), ": reward is not finite (", rollout.reward, ")");
    }
  }
}

constexpr EnumName<AdvantageKind> kAdvantageKindNames[] = {{AdvantageKind::kGrpo, "grpo"},
                                                           {AdvantageKind::kDrGrpo, "dr-grpo"}};

const char* advantage_kind_name(AdvantageKind kind) {
  return enum_name(kAdvantageKindNames, kind);
}

AdvantageKind parse_advantage_kind(const std::string& name) {
  if (auto kind = enum_from_name(kAdvantageKindNames, name)) return *kind;
  if (name == "drgrpo") return AdvantageKind::kDrGrpo;  // the spelling older configs used
  fail(ErrorKind::kInvalidArgument, "unknown advantage '", name, "' (grpo, dr-grpo)");
}

std::vector<double> group_advantages(const RolloutGroup& group, AdvantageKind kind,
                                     double std_eps) {
  STOA_CHECK(!group.rollouts.empty(), ErrorKind::kInvalidArgument, "group '", group.id,
             "' has no rollouts");
  const double n = static_cast<double>(group.rollouts.size());
  double mean = 0.0;
  for (const Rollout& r : group.rollouts) mean += r.reward;
  mean /= n;
  std::vector<double> advantages;
  advantages.reserve(group.rollouts.size());
  for (const Rollout& r : group.rollouts) advantages.push_back(r.reward - mean);
  if (kind == AdvantageKind::kGrpo) {
    double var = 0.0;
    for (double a : advantages) var += a * a;
    // Unbiased std as GRPO implementations use; a group of one has no spread (advantage 0).
    double std_dev = group.rollouts.size() > 1 ? std::sqrt(var / (n - 1.0)) : 0.0;
    for (double& a : advantages) a /= std_dev + std_eps;
  }
  return advantages;
}

}  // namespace stoa::train
