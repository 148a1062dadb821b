// The hub's coordinator, without HTTP: the protocol's calls (join, lease, submit, heartbeat) and
// the TrainerPort the trainer loop consumes. The state lives in its parts, each a class of its own
// folder (docs/architecture.md lists them): Identity (tokens, sessions, rate limits), WorkerRoster
// (the workers present), GroupBook (groups, leases, fair leasing), PromptDeck (the prompts' order
// and tokens), VersionCatalog (versions and catch-up routes), RunLedger (the ledger and its group
// commit), Verification (replay, peer and canary checks), the counters and history behind
// observe/hub_report.h. What spans several parts is decided here; two facades of the same lock
// carry the rest: HubAccess (hub_access.h, a request's token) and HubChecks (hub_checks.h, replay
// verification). HubServer (server.h) maps HTTP requests onto these; tests drive them directly.
// Thread-safe: one mutex guards the memory (hub_state.h says how); a call that wrote answers only
// once its ledger writes are durable, waited for after releasing the mutex.
#pragma once
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "env/dataset.h"
#include "net/protocol.h"
#include "pulse/blob_store.h"
#include "roles/hub/hub_access.h"
#include "roles/hub/hub_checks.h"
#include "roles/hub/hub_config.h"
#include "roles/hub/hub_state.h"
#include "roles/hub/request_error.h"
#include "roles/hub/trainer_port.h"
#include "roles/hub/worker_stats.h"

namespace stoa::hub {

struct HubSnapshot;

// The memory is HubState's, a private base: callers reach it only through these calls.
class Hub final : public TrainerPort, private HubState {
 public:
  Hub(HubConfig config, HubDeps deps);  // opens the ledger and restores the state from it
  ~Hub() override;

  // ---- the protocol (throw RequestError for 4xx; 429 when a rate limit is hit) ----
  // `peer` is the client's address (per-address limits; "" skips them: in-process callers).
  net::JoinResponse join(const std::string& bearer, const net::JoinRequest& request,
                         const std::string& peer = "");
  // Who may call what: a request's token against the scope its route needs (hub_access.h).
  HubAccess& access() { return access_; }
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
  nlohmann::json history(int64_t since_step = -1, int64_t since_version = -1) const;
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

  // ---- replay verification and peer checks (hub_checks.h; docs/design/verification.md) ----
  HubChecks& checks() { return checks_; }
  const HubChecks& checks() const { return checks_; }

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
  // Who the stages of a pipeline group were and the keys they sign with (the HTTP server's
  // PipelineGroups): intake checks a group's rollout against them, and a failed replay's blame
  // names the stage's worker. Unset: a pipeline group's rollout is refused (`unknown_group`).
  void set_pipeline_signers(PipelineSigners signers);
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
  int64_t claim_ttl_ms() const;  // how long a refused worker keeps its claim on the next group
  // Revokes open lease `lease_id` (hoarded past the deadline, or preempted from a hoarder).
  void revoke_locked(const std::string& lease_id, const char* why, int64_t now_ms);
  net::RolloutResponse reject(const std::string& reason, const std::string& detail);
  // A pipeline group's rollout (pipeline_intake.cpp): its chain checked against the group's
  // signers; a refusal, or nullopt when it holds (or the rollout is no group's).
  std::optional<net::RolloutResponse> check_pipeline_proof_locked(const std::string& caller,
                                                                  const net::RolloutSubmission& m);
  void record_step_history_locked(const StepReport& report);

  // The facades of the same memory and lock (hub_state.h).
  HubAccess access_{*this};
  HubChecks checks_{*this};
};

}  // namespace stoa::hub
