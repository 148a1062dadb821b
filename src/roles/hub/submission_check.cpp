#include "roles/hub/submission_check.h"

#include <algorithm>
#include <cmath>
#include <span>

#include "core/error.h"
#include "engine/arithmetic.h"

namespace stoa::hub {
namespace {

static_assert(net::kArithmeticOfThisBuild == engine::kArithmetic,
              "net/protocol.h names the engine arithmetic of this build");

env::RolloutRejection refuse(std::string reason, std::string detail) {
  return env::RolloutRejection{std::move(reason), std::move(detail)};
}

}  // namespace

SubmissionVerdict check_submission(const std::string& caller, const net::RolloutSubmission& m,
                                   const IntakeSnapshot& s) {
  const std::string who = cat("rollout ", m.id);
  const LeaseRow* lease = s.lease;
  if (!lease) return refuse("unknown_lease", cat(who, ": unknown lease ", m.lease_id));
  if (lease->worker_id != caller) {
    return refuse("lease_worker_mismatch",
                  cat(who, ": lease ", m.lease_id, " was issued to another worker"));
  }
  // Bits of two formulas are never compared: a replay of this rollout on the hub's arithmetic
  // could only disagree (the join refuses such a worker; this catches one that lies there).
  if (m.arithmetic != engine::kArithmetic) {
    return refuse("arithmetic_mismatch", cat(who, ": computed with engine arithmetic ",
                                             m.arithmetic, ", the run uses ", engine::kArithmetic));
  }
  const GroupRow* group = s.group;
  if (!group || m.group_id != lease->group_id || m.prompt_id != group->prompt_id) {
    return refuse("lease_mismatch", cat(who, ": group/prompt (", m.group_id, ", ", m.prompt_id,
                                        ") do not match lease ", m.lease_id));
  }
  // Revoked for hoarding: its group went to others, who may already be generating the missing
  // samples. Refused (an expired lease's late rollouts still count: the first G win), so a
  // hoarder cannot keep a lease's samples by sending them after the revocation.
  if (lease->state == LeaseState::kRevoked) {
    return refuse("lease_revoked", cat(who, ": lease ", m.lease_id,
                                       " was revoked (no rollout accepted on it in time)"));
  }
  if (group->status == GroupStatus::kTrained || group->status == GroupStatus::kDropped) {
    return refuse("group_closed", cat(who, ": group ", group->id, " is already ",
                                      group_status_name(group->status)));
  }
  if (group->status == GroupStatus::kComplete || s.group_accepted >= group->samples) {
    return refuse("group_full", cat(who, ": group ", group->id, " already has its ", group->samples,
                                    " rollouts"));
  }
  const std::vector<int32_t>& prompt = s.prompt();
  if (m.tokens.size() < prompt.size() ||
      !std::equal(prompt.begin(), prompt.end(), m.tokens.begin())) {
    return refuse("prompt_mismatch", cat(who, ": the transcript does not start with the lease's ",
                                         prompt.size(), "-token prompt"));
  }
  for (size_t t = 0; t < prompt.size() && t < m.mask.size(); ++t) {
    if (m.mask[t]) {
      return refuse("prompt_mismatch", cat(who, ": prompt token ", t, " is marked as generated"));
    }
  }
  // What a rollout may be on its own: the trainer's rule, with the run's K.
  if (auto refused = env::check_rollout(env::wire_rollout_view(m), s.limits)) {
    return refuse(refused->reason, cat(who, ": ", refused->detail));
  }
  if (m.versions.size() != m.tokens.size()) {
    return refuse("bad_shape",
                  cat(who, ": ", m.tokens.size(), " tokens but ", m.versions.size(), " versions"));
  }
  SubmissionAccepted out;
  out.prompt_length = prompt.size();
  out.min_version = UINT64_MAX;
  for (size_t t = 0; t < m.tokens.size(); ++t) {
    if (!m.mask[t]) continue;
    const uint64_t v = m.versions[t];
    if (!s.published(v)) {
      return refuse("unknown_version",
                    cat(who, ": token ", t, " claims version ", v, ", never published"));
    }
    ++out.model_tokens;
    out.min_version = std::min(out.min_version, v);
    out.max_version = std::max(out.max_version, v);
  }
  // The prompt's KV is computed when the sample starts, under a published version: the window
  // counts it as the rollout's oldest part (the replay needs its weights too, and one outside the
  // window may be pruned before the replay).
  if (m.prompt_version) {
    const uint64_t pv = *m.prompt_version;
    if (!s.published(pv))
      return refuse("unknown_version",
                    cat(who, ": the prompt claims version ", pv, ", never published"));
    out.min_version = std::min(out.min_version, pv);
  }
  if (s.latest_version > out.min_version && s.latest_version - out.min_version > s.max_staleness) {
    return refuse("stale", cat(who, ": oldest token from version ", out.min_version, ", latest is ",
                               s.latest_version, " (window ", s.max_staleness, ")"));
  }
  // The reward is the hub's own: decode what follows the prompt, as Episode::response_text does.
  try {
    const std::string response =
        s.codec->decode(std::span<const int32_t>(m.tokens).subspan(prompt.size()));
    out.reward = s.task->reward(response, *s.golden_answers);
  } catch (const Error& e) {
    return refuse("bad_token_id", cat(who, ": the transcript does not decode: ", e.what()));
  }
  STOA_CHECK(std::isfinite(out.reward), ErrorKind::kInternal, who, ": the task's reward is ",
             out.reward);
  return out;
}

}  // namespace stoa::hub
