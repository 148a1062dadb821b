// The hub's state machine, without HTTP: workers and their session tokens, groups and leases,
// rollout intake (validation, reward recomputation, durable ledger insert), versions and the
// catch-up catalog, and the TrainerPort the trainer loop consumes. HubServer (server.h) maps HTTP
// requests onto these methods; tests drive them directly. Thread-safe (one mutex; SQLite commits
// happen under it, which serialises intake — a few ms each — and keeps memory and ledger in step).
#pragma once
#include <chrono>
#include <condition_variable>
#include <cstdint>
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
#include "env/token_codec.h"
#include "net/protocol.h"
#include "pulse/blob_store.h"
#include "pulse/catalog.h"
#include "roles/hub/ledger.h"
#include "roles/hub/trainer_port.h"

namespace stoa::hub {

// An error with the HTTP status the server answers (4xx: the client's fault).
class RequestError : public Error {
 public:
  RequestError(int status, const std::string& message)
      : Error(ErrorKind::kInvalidArgument, message), status_(status) {}
  int status() const { return status_; }

 private:
  int status_;
};

struct HubConfig {
  std::string ledger_path;       // SQLite file
  std::string join_token;        // the bearer token a worker joins with (required, non-empty)
  int32_t group_size = 4;        // G
  net::SamplingParams sampling;  // sent with every lease
  int64_t lease_ttl_ms = 300'000;
  int64_t lease_max_ms = 1'800'000;  // heartbeats never extend a lease past issue + this
  uint64_t max_staleness = 4;        // in versions, on the oldest model token
  int64_t max_tokens = 4096;         // per rollout transcript
  int32_t topk = 0;
  size_t max_open_groups = 16;    // groups out for sampling at once
  size_t max_queued_groups = 64;  // complete groups waiting for the trainer (back-pressure)
  int heartbeat_interval_s = 10;
  int64_t no_work_retry_ms = 500;
  uint64_t seed = 1;  // prompt order
};

// What the hub serves and computes rewards with; all must outlive the Hub.
struct HubDeps {
  const env::Task* task = nullptr;
  const env::TokenCodec* codec = nullptr;
  int64_t vocab_size = 0;
  std::vector<env::QaItem> prompts;   // the training split
  pulse::BlobStore* store = nullptr;  // blobs + <dir>/catalog.json (written by the Publisher)
  std::function<int64_t()> clock_ms;  // defaults to the system clock (tests inject one)
};

struct WorkerStats {
  std::string id;
  std::string name;
  int64_t last_seen_ms = 0;
  std::optional<uint64_t> version;
  uint64_t tokens_generated = 0;
  double tokens_per_s = 0;
  double idle_fraction = 0;
  int64_t rollouts_accepted = 0;
  std::optional<net::BlobDownload> download;  // the worker's blob download in progress
};

class Hub final : public TrainerPort {
 public:
  Hub(HubConfig config, HubDeps deps);  // opens the ledger and restores the state from it
  ~Hub() override;

  // ---- the protocol (throw RequestError for 4xx) ----
  net::JoinResponse join(const std::string& bearer, const net::JoinRequest& request);
  // The worker id for a session token; RequestError(401) if unknown.
  std::string authenticate(const std::string& bearer) const;
  net::VersionInfo version_info(std::optional<uint64_t> after) const;
  // Blocks until a version above `after` exists, `timeout` passes or stop() is called.
  net::VersionInfo wait_version(std::optional<uint64_t> after, std::chrono::milliseconds timeout);
  net::LeaseResponse lease(const std::string& worker_id);
  void release(const std::string& worker_id, const std::string& lease_id);
  // Accepted and duplicate come back as such; validation failures as kRejected with a reason
  // code (docs/protocol.md). Throws RequestError(403) if worker_id is not the caller.
  net::RolloutResponse submit(const std::string& caller, const net::RolloutSubmission& rollout);
  net::HeartbeatResponse heartbeat(const std::string& caller, const net::Heartbeat& heartbeat);

  // ---- observability ----
  nlohmann::json status() const;
  std::string metrics() const;  // Prometheus text format 0.0.4
  std::vector<WorkerStats> workers() const;

  // ---- TrainerPort ----
  std::vector<AcceptedGroup> take_groups(size_t max_groups,
                                         std::chrono::milliseconds wait) override;
  void mark_trained(const std::vector<std::string>& group_ids, const StepReport& report) override;
  void mark_dropped(const std::vector<std::string>& group_ids, const std::string& reason) override;
  void publish_version(const pulse::Published& published, const Hash128& state_hash) override;
  int64_t last_step() const override;
  std::optional<uint64_t> latest_version() const override;
  std::map<std::string, double> counters() const override;

  // Wakes every blocked long-poll and take_groups (shutdown).
  void stop();
  // Expires overdue leases now (lease() and heartbeat() also do it lazily).
  void expire_leases();

  const HubConfig& config() const { return config_; }
  pulse::BlobStore& store() { return *deps_.store; }

 private:
  struct GroupState {
    GroupRow row;
    int64_t accepted = 0;
    std::map<std::string, int64_t> accepted_by_lease;
  };
  struct Counters;

  int64_t now() const { return deps_.clock_ms(); }
  void restore();
  void expire_locked(int64_t now_ms);
  const std::vector<int32_t>& prompt_tokens_locked(int64_t prompt_index);
  std::optional<net::Lease> lease_locked(const std::string& worker_id, int64_t now_ms);
  net::Lease make_lease_locked(GroupState& g, const std::string& worker_id, int32_t samples,
                               int64_t now_ms);
  net::RolloutResponse reject(const std::string& reason, const std::string& detail);
  net::VersionInfo version_info_locked(std::optional<uint64_t> after) const;
  void reload_catalog_locked();
  size_t queued_groups_locked() const;

  HubConfig config_;
  HubDeps deps_;
  std::unique_ptr<Ledger> ledger_;
  mutable std::mutex mutex_;
  std::condition_variable version_cv_;
  std::condition_variable groups_cv_;
  bool stopped_ = false;

  std::map<std::string, WorkerStats> workers_;
  std::map<std::string, std::string> sessions_;  // token -> worker id
  std::map<std::string, GroupState> groups_;
  std::vector<std::string> group_order_;  // creation order
  std::map<std::string, LeaseRow> leases_;
  std::set<std::string> pending_;  // handed to the trainer, not yet marked
  std::map<uint64_t, VersionRow> versions_;
  pulse::Catalog catalog_;
  std::vector<int64_t> prompt_order_;
  int64_t next_prompt_ = 0;
  std::map<int64_t, std::vector<int32_t>> prompt_cache_;
  std::unique_ptr<Counters> counters_;
};

}  // namespace stoa::hub
