// The peer checks' bookkeeping on the verification state (docs/design/verification.md, "Peer
// checks"): a check lease ended, a job forgotten, the escalation backlog handed to the trusted
// replay as it drains, a checker judged by the trusted verdict, a checker's credit, and the problem
// a checking worker may ask the task about. The Hub decides what is checked, by whom and when
// (verification_peer.cpp).
#include <algorithm>

#include "core/error.h"
#include "roles/hub/verification/verification_state.h"

namespace stoa::hub {

// Hands backlogged escalations to the trusted replay while its queue has room.
void VerificationState::drain_backlog() {
  VerificationState& v = *this;
  while (!v.backlog.empty() && v.auditor->enqueue(v.backlog.front().second)) v.backlog.pop_front();
}

// Clears the peer lease on `rollout_id` (answered, escalated or forgotten); an `expired` lease's
// id is remembered so that a late verdict on it is told why it is refused.
void VerificationState::end_check_lease(const std::string& rollout_id, bool expired) {
  VerificationState& v = *this;
  auto it = v.peer_jobs.find(rollout_id);
  if (it == v.peer_jobs.end() || it->second.job_id.empty()) return;
  VerificationState::PeerJob& p = it->second;
  v.peer_leases.erase(p.job_id);
  v.release_check_slot(p.checker);
  if (expired) v.remember_expired_check(p.job_id);
  p.job_id.clear();
  p.checker.clear();
}

// A trusted verdict on a rollout a checker spoke for: a checker whose word the trusted replay
// contradicts lied (exact replay leaves an honest checker nothing to get wrong), and is
// quarantined as a forging author is: returned with why.
std::optional<std::pair<std::string, std::string>> VerificationState::judge_checker(
    const std::string& rollout_id, const AuditVerdict& trusted) {
  VerificationState& v = *this;
  auto it = v.escalations.find(rollout_id);
  if (it == v.escalations.end()) return std::nullopt;
  const VerificationState::Escalation e = it->second;
  v.escalations.erase(it);
  if (e.checker.empty() || e.opinion == CheckOpinion::kNone || verdict_blames_nobody(trusted))
    return std::nullopt;
  const bool lied = (e.opinion == CheckOpinion::kPass) != trusted.pass;
  if (!lied || v.quarantined.count(e.checker)) return std::nullopt;
  ++v.checkers_quarantined;
  return std::make_pair(
      e.checker, e.opinion == CheckOpinion::kPass
                     ? cat("passed rollout ", rollout_id, ", which failed the hub's replay (",
                           trusted.what, " at position ", trusted.position, ")")
                     : cat("failed rollout ", rollout_id, ", which passed the hub's replay"));
}

void VerificationState::forget_check(const std::string& rollout_id) {
  VerificationState& v = *this;
  v.end_check_lease(rollout_id, true);
  v.peer_jobs.erase(rollout_id);
  v.escalations.erase(rollout_id);
  std::erase_if(v.backlog, [&](const auto& b) { return b.first == rollout_id; });
}

void VerificationState::credit_rollout(const std::string& worker_id) {
  checkers[worker_id].rollouts_passed++;
}

std::optional<env::QaItem> VerificationState::checked_problem(const std::string& worker_id,
                                                              const std::string& prompt_id) const {
  // The leased jobs only (a few per checking worker), not every waiting one.
  for (const auto& [job_id, rollout_id] : peer_leases) {
    const auto& p = peer_jobs.at(rollout_id);
    if (p.checker == worker_id && p.prompt_id == prompt_id) return p.job.problem;
  }
  // A canary is a check like any other: its task answers the same way.
  for (const auto& [job_id, c] : canaries)
    if (c.checker == worker_id && c.prompt_id == prompt_id) return c.problem;
  return std::nullopt;
}

}  // namespace stoa::hub
