// The state behind replay verification (docs/design/verification.md): the rollouts sampled for
// replay and the groups they hold, peer-check jobs and their leases, escalations to the trusted
// replay, checkers' books, canaries, the seeds used per lease, quarantined workers and the
// verdict counters. Verification decides (verification.h) and keeps this under the Hub's lock;
// what only touches this state is here: the peer checks' bookkeeping
// (peer_checks.cpp) and the canary checks (canary_checks.cpp).
#pragma once
#include <array>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>

#include "core/rng.h"
#include "env/dataset.h"
#include "net/protocol.h"
#include "roles/hub/verification/check_lease.h"
#include "roles/hub/verification/rollout_audit.h"

namespace stoa::hub {

// The job as a checking worker sees it: what the replay needs and nothing that names the author
// (worker, lease, group) or that the author chose freely (its rollout id, answer text, timings,
// kernel target) — a checker cannot recognise its team's rollouts by a mark, only by content.
// The wire's rules for a rollout still hold (a UUID id, non-empty ids): a fresh UUID per lease
// and kBlindedId.
inline constexpr const char* kBlindedId = "blinded";
inline AuditJob blind_check_job(AuditJob job) {
  net::RolloutSubmission& r = job.rollout;
  r.id = net::random_uuid();
  r.worker_id = r.lease_id = r.group_id = kBlindedId;
  r.answer.clear();
  r.turns = 0;
  r.timings = {};
  r.kernel_target.clear();
  return job;
}

struct VerificationState {
  RolloutAuditor* auditor = nullptr;
  Rng sampler;  // which rollouts are replayed: unpredictable to workers
  struct Pending {
    std::string group_id;
    std::string worker_id;
    std::string kernel_target;  // as the rollout recorded it (for by_target)
    int64_t deadline_ms = 0;
    // It waited in the backlog for room in the trusted replay's queue: overdue, its group is
    // dropped even when the run trains on timeout (that forgives a slow validator, not a flood).
    bool backlogged = false;
  };
  std::map<std::string, Pending> pending;  // rollout id -> what waits on it
  // Peer checks (verification_peer.cpp): rollouts waiting for a checking worker or leased to one. A
  // rollout here is also in `pending` (its group is held).
  struct PeerJob {
    AuditJob job;
    std::string prompt_id;
    std::string author_token, author_address;
    std::string checker;  // while leased
    std::string job_id;   // while leased
    int64_t stage_deadline_ms = 0;
  };
  std::map<std::string, PeerJob> peer_jobs;        // rollout id -> job
  std::map<std::string, std::string> peer_leases;  // job id -> rollout id
  std::set<std::string> expired_checks;            // job ids escalated while leased (bounded)
  std::deque<std::string> expired_order;
  // A rollout sent on to the trusted replay by a peer check, and what its checker said.
  struct Escalation {
    std::string checker;
    CheckOpinion opinion = CheckOpinion::kNone;
  };
  std::map<std::string, Escalation> escalations;  // rollout id ->
  // Due for the trusted replay while its queue was full (escalated peer checks, disagreements
  // first; in sampled mode, rollouts chosen for replay): they wait here and are handed over as it
  // drains; their groups stay held, up to max_wait_s. At most max_peer_jobs.
  std::deque<std::pair<std::string, AuditJob>> backlog;
  struct CheckerBook {
    int64_t leased = 0;           // checks ever leased
    size_t in_flight = 0;         // leased, not answered
    int64_t rollouts_passed = 0;  // its own rollouts that passed a check (earn checking rights)
  };
  std::map<std::string, CheckerBook> checkers;  // worker id ->
  // Canary checks (canary_checks.cpp): rollouts the trusted replay passed, handed to checkers
  // with one log-prob nudged — checks whose right answer (fail) the hub knows.
  struct CanarySource {
    AuditJob job;
    std::string author_token, author_address;
    std::string seen_by;  // the checker that passed it before its audit ("": no peer saw it)
    int64_t added_ms = 0;
  };
  // Waiting for the trusted verdict (bounded, oldest dropped), then kept until used (bounded).
  std::deque<std::pair<std::string, CanarySource>> canary_candidates;  // rollout id, source
  std::deque<CanarySource> canary_sources;
  struct Canary {
    std::string checker;
    std::string prompt_id;
    env::QaItem problem;
    int64_t position = 0;  // the nudged log-prob: where an honest replay fails
    int64_t deadline_ms = 0;
  };
  std::map<std::string, Canary> canaries;  // job id -> (while leased)
  int64_t canaries_leased = 0;
  int64_t canaries_caught = 0;  // failed, as an honest replay does
  int64_t canaries_passed = 0;  // passed: the checker lied or did not replay (quarantined)
  int64_t canaries_expired = 0;
  int64_t canaries_no_opinion = 0;  // the checker could not run the task
  int64_t peer_passed = 0;
  int64_t peer_failed = 0;
  double peer_cpu_seconds = 0;               // as the checkers report it
  std::map<std::string, int64_t> escalated;  // why -> count
  int64_t checkers_quarantined = 0;
  int64_t last_sweep_ms = 0;
  std::map<std::string, std::set<uint64_t>> seeds_used;  // lease id -> seeds accepted
  std::set<std::string> quarantined;                     // worker ids (also in the ledger)
  // Seeds used on leases issued before this hub started are read back from the ledger's
  // rollouts the first time such a lease is seen (a restart must not reopen them).
  int64_t started_ms = 0;
  std::set<std::string> seeds_restored;  // lease ids
  int64_t passed = 0;
  int64_t failed = 0;
  int64_t skipped_queue_full = 0;
  int64_t timeouts = 0;
  int64_t environment_failures = 0;  // replays the run's task could not run (not the worker's)
  int64_t unreplayable = 0;  // rollouts whose versions were pruned before their replay (ditto)
  double cpu_seconds = 0;    // validation CPU time over every verdict
  // Verdicts by the kernel target the rollout was generated on: {pass, fail}. The name comes
  // from the worker, so it is kept to a short [A-Za-z0-9_] name ("unknown" when missing, "other"
  // when malformed or past kMaxTargets distinct names): a worker can neither inject text into
  // /metrics nor grow this map without bound.
  static constexpr size_t kMaxTargets = 16;
  std::map<std::string, std::array<int64_t, 2>> by_target;
  // Counts one verdict (passed / failed and by_target).
  void count(const std::string& kernel_target, bool pass) {
    ++(pass ? passed : failed);
    ++by_target[target_label(kernel_target)][pass ? 0 : 1];
  }
  std::string target_label(const std::string& name) const {
    if (name.empty()) return "unknown";
    bool plain = name.size() <= 32;
    for (char c : name)
      plain &=
          (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
    if (!plain || (!by_target.count(name) && by_target.size() >= kMaxTargets - 1)) return "other";
    return name;
  }
  // A check (real or canary) of `checker` answered, expired or withdrawn: its slot is free.
  void release_check_slot(const std::string& checker) {
    if (auto c = checkers.find(checker); c != checkers.end() && c->second.in_flight > 0)
      --c->second.in_flight;
  }
  // A check job closed while leased (it ran out, or its group was dropped): remembered, up to a
  // bound, so that a late verdict on it is told why it is refused (409, not 404).
  static constexpr size_t kMaxExpiredChecks = 4096;
  void remember_expired_check(const std::string& job_id) {
    if (!expired_checks.insert(job_id).second) return;
    expired_order.push_back(job_id);
    if (expired_order.size() > kMaxExpiredChecks) {
      expired_checks.erase(expired_order.front());
      expired_order.pop_front();
    }
  }
  // ---- peer checks' bookkeeping (peer_checks.cpp) ----
  // Clears the peer lease on `rollout_id` (answered, escalated or forgotten); an `expired` lease's
  // id is remembered so that a late verdict on it is told why it is refused.
  void end_check_lease(const std::string& rollout_id, bool expired);
  // Forgets a rollout's peer job, escalation and backlog entry (its group was dropped or timed
  // out).
  void forget_check(const std::string& rollout_id);
  // Hands backlogged escalations to the trusted replay while its queue has room.
  void drain_backlog();
  // The trusted verdict on a rollout a checker spoke for: the checker and why it is to be
  // quarantined when the verdict contradicts it, else nullopt.
  std::optional<std::pair<std::string, std::string>> judge_checker(const std::string& rollout_id,
                                                                   const AuditVerdict& trusted);
  void credit_rollout(const std::string& worker_id);  // its own rollout passed: checking rights
  // The problem of a check (real or canary) `worker_id` holds on `prompt_id`, if any.
  std::optional<env::QaItem> checked_problem(const std::string& worker_id,
                                             const std::string& prompt_id) const;

  // ---- canary checks (canary_checks.cpp) ----
  // Keeps a job the trusted replay is about to judge as a possible canary source (bounded; the
  // ones whose verdict is overdue go first); judge_canary_candidate keeps it (a pass) or forgets
  // it.
  void note_canary_candidate(const AuditJob& job, const std::string& author_token,
                             const std::string& author_address, const std::string& seen_by,
                             int64_t now_ms, const VerifyPolicy& policy);
  void judge_canary_candidate(const std::string& rollout_id, bool pass);
  // A canary for `worker_id` from a source whose author it may check (`may_check(token,
  // address, author worker id)`) and that is as fresh as a real job (`latest` version,
  // `max_staleness`), or nullopt when none is usable. The source is used once.
  std::optional<CheckLease> lease_canary(
      const std::string& worker_id,
      const std::function<bool(const std::string&, const std::string&, const std::string&)>&
          may_check,
      int64_t now_ms, uint64_t latest, uint64_t max_staleness, const VerifyPolicy& policy);
  // The checker's verdict on canary `job_id`: returns why it is to be quarantined (it passed a
  // rollout whose replay fails), or nullopt.
  std::optional<std::string> record_canary(const std::string& checker, const std::string& job_id,
                                           const AuditVerdict& verdict);
  void expire_canaries(int64_t now_ms);
  void drop_canaries_of(const std::string& checker);

  // The counters of /v1/status and /metrics (peer: the hub runs peer checks).
  void add_counters(std::map<std::string, double>& m, bool peer) const;
  explicit VerificationState(RolloutAuditor* a, uint64_t seed)
      : auditor(a), sampler(seed, 0x5e1f) {}
};

}  // namespace stoa::hub
