// Canary checks (docs/design/verification.md, "Canary checks"): a checker's pass is taken on
// its word, and an audit of a pass only catches a checker that passed a forgery. A checker that
// never replays and passes everything (free-riding on its checking share), or one that passes
// whatever fails its replay (colluding without knowing whose forgery it holds), is never caught
// while it only meets honest rollouts. So a share of check leases is a canary: a rollout the
// trusted replay passed, with one generated log-prob nudged down by a few ulps — a forgery whose
// right verdict the hub knows without replaying it. Blinded like every check job
// (blind_check_job), it looks like any other: a checker that passes it lied and is quarantined.
// Sources are rollouts no checker saw (a new worker's first ones) or audited passes (never handed
// back to the checker that saw them), each used once, none older than kCanaryMaxAgeMs nor past
// the run's staleness window (its versions must still be in the catalog, and as recent as a real
// job's).
#include "roles/hub/verification/verification_state.h"

#include <algorithm>
#include <cmath>
#include <functional>

#include "core/error.h"
#include "core/log.h"

namespace stoa::hub {

namespace {
// A canary costs a peer replay and a copy of a rollout in memory: a few of each are enough.
constexpr size_t kMaxCanaryCandidates = 16;
constexpr size_t kMaxCanarySources = 8;
constexpr int64_t kCanaryMaxAgeMs = 10 * 60'000;
constexpr uint32_t kMaxNudgeUlps = 16;
}  // namespace

void VerificationState::note_canary_candidate(const AuditJob& job, const std::string& author_token,
                                              const std::string& author_address,
                                              const std::string& seen_by, int64_t now_ms,
                                              const VerifyPolicy& policy) {
  VerificationState& v = *this;
  if (!policy.peer || policy.canary_fraction <= 0) return;
  // A candidate whose verdict is overdue will not get one (its group was dropped meanwhile);
  // the others are kept rather than pushed out by newer ones, or a trusted replay running behind
  // would judge none of them while they are held.
  const int64_t t = now_ms;
  while (!v.canary_candidates.empty() &&
         t - v.canary_candidates.front().second.added_ms > policy.max_wait_ms)
    v.canary_candidates.pop_front();
  if (v.canary_candidates.size() >= kMaxCanaryCandidates) return;
  v.canary_candidates.emplace_back(
      job.rollout.id,
      VerificationState::CanarySource{job, author_token, author_address, seen_by, t});
}

void VerificationState::judge_canary_candidate(const std::string& rollout_id, bool pass) {
  VerificationState& v = *this;
  auto it = std::find_if(v.canary_candidates.begin(), v.canary_candidates.end(),
                         [&](const auto& c) { return c.first == rollout_id; });
  if (it == v.canary_candidates.end()) return;
  if (pass) {
    if (v.canary_sources.size() >= kMaxCanarySources) v.canary_sources.pop_front();
    v.canary_sources.push_back(std::move(it->second));
  }
  v.canary_candidates.erase(it);
}

std::optional<CheckLease> VerificationState::lease_canary(
    const std::string& worker_id,
    const std::function<bool(const std::string&, const std::string&, const std::string&)>&
        may_check,
    int64_t now_ms, uint64_t latest, uint64_t max_staleness, const VerifyPolicy& policy) {
  VerificationState& v = *this;
  const int64_t t = now_ms;
  // A canary must look as fresh as a real job: a source past the staleness window now (which
  // no real job was when it was accepted) would tell itself apart by its versions.
  auto too_old = [&](const VerificationState::CanarySource& s) {
    if (t - s.added_ms > kCanaryMaxAgeMs) return true;
    const net::RolloutSubmission& r = s.job.rollout;
    for (size_t i = 0; i < r.versions.size(); ++i)
      if (r.mask[i] && latest > r.versions[i] && latest - r.versions[i] > max_staleness)
        return true;
    return false;
  };
  std::erase_if(v.canary_sources, too_old);
  // The newest usable source: its versions are the likeliest to be still replayable.
  for (auto it = v.canary_sources.rbegin(); it != v.canary_sources.rend(); ++it) {
    const VerificationState::CanarySource& s = *it;
    if (s.seen_by == worker_id ||
        !may_check(s.author_token, s.author_address, s.job.rollout.worker_id))
      continue;
    AuditJob job = s.job;
    v.canary_sources.erase(std::next(it).base());
    std::vector<size_t> generated;
    for (size_t i = job.prompt_length; i < job.rollout.tokens.size(); ++i)
      if (job.rollout.mask.at(i)) generated.push_back(i);
    if (generated.empty()) return std::nullopt;
    const size_t position = generated[v.sampler.below(generated.size())];
    float& logprob = job.rollout.logprobs.at(position);
    const uint32_t ulps = 1 + static_cast<uint32_t>(v.sampler.below(kMaxNudgeUlps));
    for (uint32_t k = 0; k < ulps; ++k) logprob = std::nextafter(logprob, -INFINITY);
    const std::string job_id = net::random_token();
    v.canaries[job_id] = {worker_id, job.rollout.prompt_id, job.problem,
                          static_cast<int64_t>(position), t + policy.peer_lease_ms};
    ++v.canaries_leased;
    return CheckLease{job_id, blind_check_job(std::move(job)), policy.peer_lease_ms};
  }
  return std::nullopt;
}

std::optional<std::string> VerificationState::record_canary(const std::string& worker_id,
                                                            const std::string& job_id,
                                                            const AuditVerdict& verdict) {
  VerificationState& v = *this;
  const VerificationState::Canary canary = v.canaries.at(job_id);
  v.canaries.erase(job_id);
  v.release_check_slot(worker_id);
  v.peer_cpu_seconds += verdict.cpu_seconds;
  if (!verdict.pass && verdict.what == kEnvironmentVerdict) {
    ++v.canaries_no_opinion;
  } else if (!verdict.pass) {
    ++v.canaries_caught;
    if (verdict.position != canary.position)
      log_warn("verify", "checker ", worker_id, " failed canary ", job_id, " at position ",
               verdict.position, " (", verdict.what, "); it differs at ", canary.position);
  } else {
    ++v.canaries_passed;
    ++v.checkers_quarantined;
    return cat("passed canary check ", job_id, ", a rollout the hub changed at position ",
               canary.position, " (a replay fails it there)");
  }
  return std::nullopt;
}

void VerificationState::expire_canaries(int64_t now_ms) {
  VerificationState& v = *this;
  for (auto it = v.canaries.begin(); it != v.canaries.end();) {
    if (now_ms < it->second.deadline_ms) {
      ++it;
      continue;
    }
    v.release_check_slot(it->second.checker);
    v.remember_expired_check(it->first);
    ++v.canaries_expired;
    it = v.canaries.erase(it);
  }
}

void VerificationState::drop_canaries_of(const std::string& checker) {
  std::erase_if(canaries, [&](const auto& c) { return c.second.checker == checker; });
}

}  // namespace stoa::hub
