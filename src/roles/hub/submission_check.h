// Rollout intake as a pure function: whether a submission may be stored, decided from a snapshot
// of what the hub knows, touching no hub state. Hub::intake_locked (intake.cpp) resolves the
// snapshot, calls check_submission, and does what follows an acceptance (the ledger row, the
// lease's and group's state, counters, the audit); what needs the hub's memory of earlier
// submissions (a repeated id, a seed already used) stays there.
//
// The order of the checks is the order of the reasons a worker is told: first whether the lease
// is its own and current, then the group's state, the prompt, the rollout rule shared with the
// trainer (env/rollout_rule.h), the versions and the staleness window, the reward.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <variant>
#include <vector>

#include "env/rollout_rule.h"
#include "env/task.h"
#include "env/token_codec.h"
#include "net/protocol.h"
#include "roles/hub/ledger/ledger.h"

namespace stoa::hub {

struct IntakeSnapshot {
  const LeaseRow* lease = nullptr;  // the lease the submission names; nullptr: unknown
  const GroupRow* group = nullptr;  // the lease's group; nullptr: unknown
  int64_t group_accepted = 0;       // rollouts already accepted on the group
  // The group's rendered prompt (rendered on first use: a group restored by a restart has none).
  std::function<const std::vector<int32_t>&()> prompt;
  std::function<bool(uint64_t)> published;  // was version v published?
  uint64_t latest_version = 0;
  uint64_t max_staleness = 0;
  env::RolloutLimits limits;  // the run's vocabulary, max_tokens and K
  const env::TokenCodec* codec = nullptr;
  const env::Task* task = nullptr;
  const std::vector<std::string>* golden_answers = nullptr;  // of the group's prompt
};

// What an acceptance stores: the hub's own reward and the version span of the model tokens.
struct SubmissionAccepted {
  double reward = 0;
  uint64_t min_version = 0, max_version = 0;
  int64_t model_tokens = 0;
  size_t prompt_length = 0;
};

using SubmissionVerdict = std::variant<SubmissionAccepted, env::RolloutRejection>;

// `caller` is the worker the session token names. The rejection's detail starts with
// "rollout <id>". Throws only for a task whose reward is not finite (the task's bug, not the
// worker's: kInternal).
SubmissionVerdict check_submission(const std::string& caller, const net::RolloutSubmission& m,
                                   const IntakeSnapshot& snapshot);

}  // namespace stoa::hub
