// Peer checks (docs/design/verification.md, "Peer checks"): every accepted rollout past its
// author's first ones is replayed by another worker, chosen by the hub at random, before its
// group may train. One honest replay decides, so a checker's pass is taken; a failing check, a
// check not answered in time, a job no peer took, and a random share of the passes go on to the
// trusted replay (the hub's own thread or a `stoa validate`), whose verdict quarantines whoever
// lied: the author of a forged rollout, a checker that failed an honest one or passed a forged one.
#include <algorithm>

#include "core/log.h"
#include "net/protocol.h"
#include "roles/hub/observe/hub_counters.h"
#include "roles/hub/request_error.h"
#include "roles/hub/verification/verification.h"
#include "roles/hub/verification/verification_state.h"

namespace stoa::hub {

namespace {
constexpr int64_t kSweepEveryMs = 100;
// A worker counts as present for the distinct-checker rule when seen this recently.
constexpr int64_t kPresentMs = 60'000;
}  // namespace

void Verification::enqueue_check(AuditJob job, const GroupState& g) {
  VerificationState& v = *state_;
  const std::string rollout_id = job.rollout.id;
  const auto& author = parts_.workers[job.rollout.worker_id];
  const bool full = v.peer_jobs.size() >= parts_.config.verify.max_peer_jobs;
  VerificationState::PeerJob& p = v.peer_jobs[rollout_id];
  p.job = std::move(job);
  p.prompt_id = g.row.prompt_id;
  p.author_token = author.token_name;
  p.author_address = author.address;
  p.stage_deadline_ms = now() + parts_.config.verify.peer_wait_ms;
  v.pending[rollout_id] = {g.row.id, p.job.rollout.worker_id, p.job.rollout.kernel_target,
                           now() + parts_.config.verify.max_wait_ms};
  if (full) escalate(rollout_id, "peer_queue_full", "", CheckOpinion::kNone);
}

void Verification::escalate(const std::string& rollout_id, const std::string& why,
                            const std::string& checker, CheckOpinion opinion) {
  VerificationState& v = *state_;
  auto it = v.peer_jobs.find(rollout_id);
  if (it == v.peer_jobs.end()) return;
  if (why == "audit")  // a pass the trusted replay also judges: a canary if it holds
    v.note_canary_candidate(it->second.job, it->second.author_token, it->second.author_address,
                            checker, now(), parts_.config.verify);
  AuditJob job = std::move(it->second.job);
  state_->end_check_lease(rollout_id, false);
  v.peer_jobs.erase(rollout_id);
  v.escalated[why]++;
  v.escalations[rollout_id] = {checker, opinion};
  if (auto pending = v.pending.find(rollout_id); pending != v.pending.end())
    pending->second.deadline_ms = now() + parts_.config.verify.max_wait_ms;
  if (v.backlog.empty() && v.auditor->enqueue(job)) return;
  if (v.backlog.size() >= parts_.config.verify.max_peer_jobs) {
    // Memory is bounded: a rollout that can be neither checked nor kept waiting does not train.
    ++v.skipped_queue_full;
    v.escalations.erase(rollout_id);
    auto pending = v.pending.find(rollout_id);
    const std::string group_id = pending != v.pending.end() ? pending->second.group_id : "";
    v.pending.erase(rollout_id);
    log_warn("verify", "rollout ", rollout_id, " cannot be checked (", why,
             "; the trusted replay is ", v.backlog.size(), " jobs behind): its group is dropped");
    if (!group_id.empty()) drop_group(group_id, "unchecked");
    return;
  }
  // The trusted replay is behind: the job waits its turn, a disagreement (someone is lying)
  // before an audit or a job nobody took. Its group stays held; past max_wait_s it is dropped.
  if (why == "disagreement")
    v.backlog.emplace_front(rollout_id, std::move(job));
  else
    v.backlog.emplace_back(rollout_id, std::move(job));
}

void Verification::sweep(int64_t now_ms) {
  if (!state_) return;
  VerificationState& v = *state_;
  if (now_ms - v.last_sweep_ms < kSweepEveryMs) return;
  v.last_sweep_ms = now_ms;
  state_->drain_backlog();  // in either mode: rollouts the trusted replay had no room for
  if (!parts_.config.verify.peer) return;
  state_->expire_canaries(now_ms);
  std::vector<std::pair<std::string, std::string>> due;  // rollout id, checker ("" : unclaimed)
  for (const auto& [id, p] : v.peer_jobs)
    if (now_ms >= p.stage_deadline_ms) due.emplace_back(id, p.checker);
  for (const auto& [id, checker] : due) {
    if (!checker.empty()) state_->end_check_lease(id, true);
    escalate(id, checker.empty() ? "unclaimed" : "check_timeout", checker, CheckOpinion::kNone);
  }
}

void Verification::note_address(const std::string& worker_id, const std::string& peer) {
  if (peer.empty()) return;
  if (auto w = parts_.workers.find(worker_id); w != parts_.workers.end()) w->second.address = peer;
}

void Verification::require_peer_checks() const {
  if (!state_ || !parts_.config.verify.peer)
    throw RequestError(404, "this hub runs no peer checks ([verify] peer = false)");
}

std::optional<CheckLease> Verification::lease_check(const std::string& worker_id,
                                                    const std::string& peer, uint64_t latest) {
  const int64_t t = now();
  sweep(t);
  VerificationState& v = *state_;
  if (v.quarantined.count(worker_id)) return std::nullopt;
  note_address(worker_id, peer);
  auto w = parts_.workers.find(worker_id);
  if (w == parts_.workers.end()) return std::nullopt;
  VerificationState::CheckerBook& book = v.checkers[worker_id];
  const VerifyPolicy& policy = parts_.config.verify;
  const double earned =
      policy.check_share * static_cast<double>(book.rollouts_passed) + policy.check_allowance;
  if (book.in_flight >= policy.max_checks_in_flight || static_cast<double>(book.leased) >= earned)
    return std::nullopt;
  // The distinct-checker rule, relaxed only where the fleet leaves no choice: a checker must
  // differ from the author in join token and in address while some present worker does.
  size_t present = 0;
  std::map<std::string, size_t> by_token, by_address;
  for (const auto& [id, ws] : parts_.workers) {
    if (t - ws.last_seen_ms > kPresentMs || v.quarantined.count(id)) continue;
    ++present;
    ++by_token[ws.token_name];
    if (!ws.address.empty()) ++by_address[ws.address];
  }
  auto others = [present](const std::map<std::string, size_t>& counts, const std::string& key) {
    auto it = counts.find(key);
    return present - (it == counts.end() ? 0 : std::min(present, it->second));
  };
  const WorkerStats& me = w->second;
  auto may_check = [&](const std::string& author_token, const std::string& author_address,
                       const std::string& author) {
    if (author == worker_id) return false;
    if (author_token == me.token_name && others(by_token, author_token) > 0) return false;
    return author_address.empty() || author_address != me.address ||
           others(by_address, author_address) == 0;
  };
  std::vector<const std::string*> eligible;
  for (const auto& [id, p] : v.peer_jobs)
    if (p.checker.empty() && may_check(p.author_token, p.author_address, p.job.rollout.worker_id))
      eligible.push_back(&id);
  if (eligible.empty()) return std::nullopt;
  // Only while real jobs wait, so that a canary comes when a check would (and costs the fleet
  // about canary_fraction replays per checked rollout, not one per idle poll).
  if (policy.canary_fraction > 0 && v.sampler.chance(policy.canary_fraction)) {
    if (auto canary = v.lease_canary(worker_id, may_check, now(), latest,
                                     parts_.config.max_staleness, policy)) {
      ++book.leased;
      ++book.in_flight;
      return canary;
    }
  }
  const std::string rollout_id = *eligible[v.sampler.below(eligible.size())];
  VerificationState::PeerJob& p = v.peer_jobs.at(rollout_id);
  p.checker = worker_id;
  p.job_id = net::random_token();
  p.stage_deadline_ms = t + policy.peer_lease_ms;
  v.peer_leases[p.job_id] = rollout_id;
  ++book.leased;
  ++book.in_flight;
  return CheckLease{p.job_id, blind_check_job(p.job), policy.peer_lease_ms};
}

std::string Verification::record_check(const std::string& worker_id, const std::string& job_id,
                                       const AuditVerdict& verdict) {
  VerificationState& v = *state_;
  sweep(now());
  if (auto c = v.canaries.find(job_id); c != v.canaries.end() && c->second.checker == worker_id) {
    if (auto why = v.record_canary(worker_id, job_id, verdict)) quarantine(worker_id, *why);
    return "";
  }
  auto lease = v.peer_leases.find(job_id);
  if (lease == v.peer_leases.end() || v.peer_jobs.at(lease->second).checker != worker_id) {
    if (v.expired_checks.count(job_id))
      throw RequestError(409, cat("check: job '", job_id.substr(0, 64),
                                  "' is closed (it ran out and went to the hub's replay, or "
                                  "its group was dropped): the verdict is not needed"));
    throw RequestError(404, cat("check: you hold no check job '", job_id.substr(0, 64), "'"));
  }
  const std::string rollout_id = lease->second;
  state_->end_check_lease(rollout_id, false);
  v.peer_cpu_seconds += verdict.cpu_seconds;
  if (verdict.pass) {
    ++v.peer_passed;
    if (v.sampler.chance(parts_.config.verify.audit_fraction)) {
      escalate(rollout_id, "audit", worker_id, CheckOpinion::kPass);
    } else {
      v.credit_rollout(v.peer_jobs.at(rollout_id).job.rollout.worker_id);
      v.peer_jobs.erase(rollout_id);
      v.pending.erase(rollout_id);
    }
  } else if (verdict.what == kEnvironmentVerdict) {
    // The checker could not run the task (its own trouble or the environment's): no opinion.
    escalate(rollout_id, "checker_environment", worker_id, CheckOpinion::kNone);
  } else {
    ++v.peer_failed;
    log_warn("verify", "worker ", worker_id, " says rollout ", rollout_id, " fails at position ",
             verdict.position, " (", verdict.what, "); the hub's replay decides");
    escalate(rollout_id, "disagreement", worker_id, CheckOpinion::kFail);
  }
  return rollout_id;
}

size_t Verification::checks_waiting() const {
  // Every peer job is either waiting or leased (escalated ones have left peer_jobs).
  return state_ ? state_->peer_jobs.size() - state_->peer_leases.size() : 0;
}

}  // namespace stoa::hub
