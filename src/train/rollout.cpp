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

env::RolloutView rollout_view(const Rollout& r) {
  return env::RolloutView{r.id,   r.tokens,   r.trainable,     r.behaviour_logprobs,
                          r.topk, r.topk_ids, r.topk_logprobs, r.reward};
}

void validate_rollout(const Rollout& rollout, int64_t vocab_size, int64_t max_tokens,
                      const std::string& group_id) {
  env::RolloutLimits limits;
  limits.vocab_size = vocab_size;
  limits.max_tokens = max_tokens;
  if (auto refused = env::check_rollout(rollout_view(rollout), limits)) {
    fail(ErrorKind::kInvalidArgument, rollout_name(rollout, group_id), ": ", refused->detail, " [",
         refused->reason, "]");
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
