// The hub's coordinator, without HTTP: the protocol's calls (join, lease, submit, heartbeat, the
// checks) and the TrainerPort the trainer loop consumes. The state lives in its parts, each a
// class of its own folder (docs/architecture.md lists them): Identity (tokens, sessions, rate
// limits), WorkerRoster (the workers present), GroupBook (groups, leases, fair leasing), PromptDeck
// (the prompts' order and tokens), VersionCatalog (versions and catch-up routes), RunLedger (the
// ledger and its group commit), Verification (replay, peer and canary checks), the counters and
// history behind observe/hub_report.h. What spans several parts is decided here. HubServer
// (server.h) maps HTTP requests onto these methods; tests drive them directly. Thread-safe: one
// mutex guards the memory, the parts included (none locks on its own); ledger writes are queued
// under it, in the order memory changed, and group-committed by the RunLedger's writer thread. A
// call that wrote answers only once its writes are durable, waiting for that after releasing the
// mutex, so no fsync runs under the mutex.
#pragma once
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "env/dataset.h"
#include "env/task.h"
#include "env/task_registry.h"
#include "env/token_codec.h"
#include "model/config.h"
#include "net/protocol.h"
#include "pulse/blob_store.h"
#include "roles/hub/hub_config.h"
#include "roles/hub/identity/identity.h"
#include "roles/hub/leasing/group_book.h"
#include "roles/hub/ledger/ledger.h"
#include "roles/hub/ledger/run_ledger.h"
#include "roles/hub/observe/run_history.h"
#include "roles/hub/prompts/prompt_deck.h"
#include "roles/hub/request_error.h"
#include "roles/hub/roster/worker_roster.h"
#include "roles/hub/trainer_port.h"
#include "roles/hub/verification/check_lease.h"
#include "roles/hub/verification/rollout_audit.h"
#include "roles/hub/versions/version_catalog.h"
#include "roles/hub/worker_stats.h"

namespace stoa::hub {

struct HubCounters;
struct HubSnapshot;
class Verification;

class Hub final : public TrainerPort {
 public:
  Hub(HubConfig config, HubDeps deps);  // opens the ledger and restores the state from it
  ~Hub() override;

  // ---- the protocol (throw RequestError for 4xx; 429 when a rate limit is hit) ----
  // `peer` is the client's address (per-address limits; "" skips them: in-process callers).
  net::JoinResponse join(const std::string& bearer, const net::JoinRequest& request,
                         const std::string& peer = "");
  // The worker id for a session token; RequestError(401) if unknown, expired or its join token
  // was revoked.
  std::string authenticate(const std::string& bearer);
  // The dashboard, /v1/status and /metrics: open when the hub binds to loopback, otherwise a
  // token of scope `operator` is required (RequestError 401).
  void check_operator(const std::string& bearer, bool loopback);
  // Where the operator token made at first start was written ("" when one was configured).
  const std::string& operator_token_file() const { return identity_.operator_token_file(); }
  // The trainer routes (trainer_routes.cpp): RequestError 401 without a token, 403 for one that
  // is not of scope `train`. Where a trainer token made at first start was written ("" if none).
  void check_trainer(const std::string& bearer);
  const std::string& trainer_token_file() const { return identity_.trainer_token_file(); }
  net::VersionInfo version_info(std::optional<uint64_t> after) const;
  // Blocks until a version above `after` exists, `timeout` passes or stop() is called.
  net::VersionInfo wait_version(std::optional<uint64_t> after, std::chrono::milliseconds timeout);
  net::LeaseResponse lease(const std::string& worker_id, const std::string& peer = "");
  void release(const std::string& worker_id, const std::string& lease_id);
  // Accepted and duplicate come back as such; validation failures as kRejected with a reason
  // code (docs/protocol.md). Throws RequestError(403) if worker_id is not the caller.
  net::RolloutResponse submit(const std::string& caller, const net::RolloutSubmission& rollout,
                              const std::string& peer = "");
  net::HeartbeatResponse heartbeat(const std::string& caller, const net::Heartbeat& heartbeat);

  // ---- observability (built from a snapshot: the hub's lock is held only to copy) ----
  // The worker list is one page: `limit` (capped at status_max_workers) workers from `offset`.
  nlohmann::json status(size_t offset = 0, size_t limit = 100) const;
  std::string metrics() const;  // Prometheus text format 0.0.4
  // The run over time for the dashboard's charts (run_history.h); never takes the hub's lock.
  nlohmann::json history(int64_t since_step = -1, int64_t since_version = -1) const {
    return history_.to_json(since_step, since_version);
  }
  std::vector<WorkerStats> workers() const;
  // Forgets workers idle past worker_idle_expiry_ms now (join and heartbeat do it lazily).
  void expire_workers();

  // ---- TrainerPort ----
  std::vector<AcceptedGroup> take_groups(size_t max_groups,
                                         std::chrono::milliseconds wait) override;
  void mark_trained(const std::vector<std::string>& group_ids, const StepReport& report) override;
  void mark_dropped(const std::vector<std::string>& group_ids, const std::string& reason) override;
  void publish_version(const pulse::Published& published, const Hash128& state_hash) override;
  int64_t last_step() const override;
  std::optional<uint64_t> latest_version() const override;
  std::map<std::string, double> counters() const override;
  // A trainer away from the hub says which taken groups it still holds (not yet marked): the
  // pending set becomes exactly those (the ones still complete). Groups taken by an answer that
  // never arrived, or held by a trainer that restarted, come back; groups a trainer kept across
  // a restart of the hub are not handed out twice.
  void hold_for_trainer(const std::vector<std::string>& held);

  // ---- replay verification (verification/verification.h; docs/design/verification.md) ----
  // From now on rollouts are sampled for replay by config().verify and sent to `auditor` (null:
  // off), leases carry seeds and rollouts must name one. The auditor must outlive the hub's use.
  void set_auditor(RolloutAuditor* auditor);
  // A validator's verdict on rollout `rollout_id`; a failure quarantines its worker.
  void record_verdict(const std::string& rollout_id, const AuditVerdict& verdict);
  bool quarantined(const std::string& worker_id) const;
  // The validation routes (`stoa validate --hub URL`): a token of scope `operator` or `validate`
  // is required even when the hub binds to loopback, since a verdict can quarantine a worker.
  // RequestError 401 without a token, 403 for one that is not a validator's.
  void check_validator(const std::string& bearer);
  bool is_validator(const std::string& bearer);
  // ---- peer checks (verification/verification_peer.cpp; docs/design/verification.md) ----
  using CheckLease = hub::CheckLease;  // verification/check_lease.h
  // A rollout for worker `worker_id` to replay, chosen at random among those it may check, or
  // nullopt (nothing eligible, or the worker is at its share). RequestError 404 when the hub
  // runs no peer checks.
  std::optional<CheckLease> lease_check(const std::string& worker_id, const std::string& peer = "");
  // The worker's verdict on its check `job_id`: a pass releases the rollout (or sends a random
  // audit_fraction on to the trusted replay), a failure sends it there. RequestError 404 for a
  // job this worker does not hold, 409 for one that ran out and went to the trusted replay.
  // Returns the rollout id ("" for a canary, verification/canary_checks.cpp: a checker that passes
  // one is quarantined).
  std::string record_check(const std::string& worker_id, const std::string& job_id,
                           const AuditVerdict& verdict);
  size_t checks_waiting() const;

  // Wakes every blocked long-poll and take_groups (shutdown).
  void stop();
  // The run is over (its trainer reached max_steps): from now on every lease and heartbeat
  // answers run_ended, so a worker stops and tells its volunteer instead of waiting for work
  // that will never come (workers.cpp).
  void end_run();
  bool run_ended() const;
  // The workers heard from within the last `recent_ms` that no answer has yet told the run is
  // over: the process waits for them (bounded) before it stops serving.
  size_t workers_not_told_of_end(int64_t recent_ms) const;
  // Called after every publish_version(), outside the hub's lock: the async HTTP server wakes
  // its parked long-polls with it (they hold no thread to wait on version_cv_). nullptr: none.
  void set_version_listener(std::function<void()> listener);
  // Expires overdue leases and revokes hoarded ones now (lease() and heartbeat() also do it
  // lazily).
  void expire_leases();
  // How long a lease may go without an accepted rollout (HubConfig::hoard_grace_ms); 0: never
  // revoked.
  int64_t hoard_deadline_ms() const;

  const HubConfig& config() const { return config_; }
  const HubDeps& deps() const { return deps_; }
  int64_t now_ms() const { return now(); }
  // The problem of `prompt_id` when `worker_id` holds an open lease on one of its groups
  // (task_proxy.cpp: the task served through the hub answers only about leased problems).
  std::optional<env::QaItem> leased_problem(const std::string& worker_id,
                                            const std::string& prompt_id) const;
  pulse::BlobStore& store() { return *deps_.store; }
  pulse::BlobStore* run_files_store() { return deps_.run_files_store; }

 private:
  int64_t now() const { return deps_.clock_ms(); }
  void restore();
  void on_ledger_commit();  // the writer thread, after each commit
  void heartbeat_locked(const std::string& caller, const net::Heartbeat& heartbeat,
                        net::HeartbeatResponse& response);
  net::RolloutResponse intake_locked(const std::string& caller, const net::RolloutSubmission& m,
                                     std::string payload);
  // A rotated session for `worker_id`, its hash written to the worker's ledger row.
  std::string issue_session_locked(const std::string& worker_id, const std::string& token_name,
                                   int64_t now_ms);
  void expire_workers_locked(int64_t now_ms);
  HubSnapshot snapshot(size_t offset, size_t limit) const;
  void expire_locked(int64_t now_ms);
  std::optional<net::Lease> lease_locked(const std::string& worker_id, const std::string& peer,
                                         int64_t now_ms);
  net::Lease make_lease_locked(GroupState& g, const std::string& worker_id, const std::string& peer,
                               int32_t samples, int64_t now_ms);
  // How long a worker refused a group keeps its claim on the next one: it asks again after
  // no_work_retry_ms (a worker waits at least that; a few of them cover a slow round trip).
  int64_t claim_ttl_ms() const { return std::max<int64_t>(2000, 4 * config_.no_work_retry_ms); }
  // Revokes open lease `lease_id` (hoarded past the deadline, or preempted from a hoarder).
  void revoke_locked(const std::string& lease_id, const char* why, int64_t now_ms);
  net::RolloutResponse reject(const std::string& reason, const std::string& detail);
  void record_step_history_locked(const StepReport& report);

  HubConfig config_;
  HubDeps deps_;
  // Reads under mutex_, writes through its group commit; stopped (drained) first in ~Hub while
  // the rest still exists.
  std::unique_ptr<RunLedger> ledger_;
  mutable std::mutex mutex_;
  std::condition_variable version_cv_;
  std::condition_variable groups_cv_;
  bool stopped_ = false;
  std::function<void()> version_listener_;  // guarded by mutex_

  WorkerRoster roster_;            // the workers present, the run's end
  Identity identity_;              // tokens, sessions, rate limits
  GroupBook book_;                 // groups, leases and fair leasing
  std::set<std::string> pending_;  // handed to the trainer, not yet marked
  VersionCatalog versions_;        // versions published, the catch-up catalog
  // The prompts' order, cursor and rendered tokens. A lease path meets a prompt not rendered
  // before it wrote anything (PromptDeck::NotRendered): lease() renders it outside the lock and
  // tries again, so a slow environment never holds every other request behind the hub's mutex.
  PromptDeck prompts_;
  std::unique_ptr<HubCounters> counters_;
  RunHistory history_;
  // Seeds, replays, held groups, peer checks, quarantine; made with the ledger, whose rows it
  // reads and writes.
  std::unique_ptr<Verification> verification_;
  int64_t last_step_ = 0;  // the ledger's last step, kept in memory
};

}  // namespace stoa::hub
