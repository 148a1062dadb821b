// Replay verification on the hub (docs/design/verification.md), one facade for the Hub: lease
// seeds and the seed check at intake, which accepted rollouts are replayed (by the trusted
// replay, or by a peer chosen at random), groups held back from the trainer until their
// verdicts, the verdicts themselves, quarantine, and peer checks leased, answered, escalated and
// swept. It owns the VerificationState (null while verification is off) and acts on the hub's
// other parts through VerificationParts: a quarantine or a verdict that cannot come drops a
// group in the GroupBook and the ledger, unless the trainer has taken it (past recall). Not
// thread-safe: the Hub calls every method under its lock and wakes take_groups afterwards where
// a verdict may have released a group.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "env/dataset.h"
#include "env/rollout_rule.h"
#include "net/protocol.h"
#include "roles/hub/groups/pipeline_groups.h"
#include "roles/hub/hub_config.h"
#include "roles/hub/leasing/group_book.h"
#include "roles/hub/ledger/run_ledger.h"
#include "roles/hub/verification/check_lease.h"
#include "roles/hub/verification/rollout_audit.h"
#include "roles/hub/worker_stats.h"

namespace stoa::hub {

struct HubCounters;
struct VerificationState;

// What of the hub verification reads and changes, all guarded by the Hub's lock.
struct VerificationParts {
  const HubConfig& config;
  const HubDeps& deps;  // the prompts and the clock
  RunLedger& ledger;
  GroupBook& book;
  const std::set<std::string>& taken;  // groups handed to the trainer, not yet marked
  HubCounters& counters;
  std::map<std::string, WorkerStats>& workers;
};

class Verification {
 public:
  explicit Verification(VerificationParts parts);
  ~Verification();

  // From now on rollouts are sampled for replay by config.verify and sent to `auditor` (null:
  // off), leases carry seeds and rollouts must name one. A first start reads the quarantines
  // back from the ledger.
  void set_auditor(RolloutAuditor* auditor);
  bool on() const { return state_ != nullptr; }
  // The state, for the hub's reports (null while off).
  const VerificationState* state() const { return state_.get(); }

  // ---- leases and intake ----
  // The sampling seeds of a lease's samples (none while off): a function of the lease id and the
  // run's seed, so a restarted hub gives the same seeds and stores none.
  std::vector<uint64_t> lease_seeds(const std::string& lease_id, int32_t samples) const;
  // Why a rollout's seed is refused (missing, not one of its lease's, used already), or nullopt.
  std::optional<env::RolloutRejection> check_seed(const net::RolloutSubmission& rollout,
                                                  const LeaseRow& lease);
  // An accepted rollout: sampled (or always, with peer checks) for a replay that holds its group.
  void audit(const net::RolloutSubmission& rollout, const GroupState& group, size_t prompt_length);
  // Whether group `group_id` must not go to the trainer yet. A verdict overdue by the policy's
  // deadline either releases the group (train_on_timeout) or drops it.
  bool held_for_verdict(const std::string& group_id);
  // Where a worker's request came from: the distinct-checker rule ("" changes nothing).
  void note_address(const std::string& worker_id, const std::string& peer);

  // ---- verdicts and quarantine ----
  // A trusted verdict on rollout `rollout_id`; a failure quarantines its worker (and a checker
  // whose word it contradicts).
  void record_verdict(const std::string& rollout_id, const AuditVerdict& verdict);
  bool quarantined(const std::string& worker_id) const;
  // A worker caught outright (another worker's rollout id): counted as a failed verdict and
  // quarantined.
  void caught(const std::string& worker_id, const std::string& kernel_target,
              const std::string& why);
  // Pipeline groups' stages (Hub::set_pipeline_signers): a failed replay of a group's rollout
  // that blames one of its stages quarantines that stage's worker instead of the head.
  void set_pipeline_signers(PipelineSigners signers) { signers_ = std::move(signers); }

  // ---- peer checks ----
  // RequestError 404 when the hub runs no peer checks.
  void require_peer_checks() const;
  // A rollout for `worker_id` to replay, chosen at random among those it may check, or a canary;
  // nullopt when nothing is eligible or the worker is at its share. `latest` is the newest
  // version published (a canary is as fresh as a real job).
  std::optional<CheckLease> lease_check(const std::string& worker_id, const std::string& peer,
                                        uint64_t latest);
  // The worker's verdict on its check `job_id` (RequestError 404 for a job it does not hold,
  // 409 for one that ran out); returns the rollout id ("" for a canary).
  std::string record_check(const std::string& worker_id, const std::string& job_id,
                           const AuditVerdict& verdict);
  size_t checks_waiting() const;
  // The trusted replay's backlog drains (either mode); peer checks past their deadlines go to
  // the trusted replay; canaries expire (at most every 100 ms).
  void sweep(int64_t now_ms);
  // The problem of a check `worker_id` holds on `prompt_id` (the task served through the hub).
  std::optional<env::QaItem> checked_problem(const std::string& worker_id,
                                             const std::string& prompt_id) const;

  // The counters of /v1/status and /metrics.
  void add_counters(std::map<std::string, double>& m) const;

 private:
  int64_t now() const { return parts_.deps.clock_ms(); }
  void quarantine(const std::string& worker_id, const std::string& why);
  void drop_group(const std::string& group_id, const std::string& reason);
  void enqueue_check(AuditJob job, const GroupState& group);
  // Sends the rollout of peer job `rollout_id` on to the trusted replay (or its backlog, while
  // the replay is behind).
  void escalate(const std::string& rollout_id, const std::string& why, const std::string& checker,
                CheckOpinion opinion);

  // The worker a failed verdict blames: the stage of a pipeline group's rollout that the
  // replay found lying, else the submitter.
  std::string blamed_worker(const std::string& rollout_id, const std::string& submitter,
                            const AuditVerdict& verdict) const;
  // The pipeline group an accepted rollout names (0: none, or the rollout is unknown).
  uint64_t pipeline_group_of(const std::string& rollout_id) const;
  // Drops `group_id` and every group not yet taken holding a rollout of `pipeline_group`.
  void drop_pipeline_groups(uint64_t pipeline_group, const std::string& group_id);
  // Drops every group the trainer has not taken that holds a rollout `rollout` picks.
  void drop_groups_holding(const std::function<bool(const RolloutRow&)>& rollout);

  VerificationParts parts_;
  std::unique_ptr<VerificationState> state_;
  PipelineSigners signers_;
};

}  // namespace stoa::hub
