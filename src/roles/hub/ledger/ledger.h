// The run ledger: one SQLite database (WAL, synchronous=FULL) holding workers, groups, leases,
// accepted rollouts (payload included), published versions and trainer steps. It is the hub's
// memory across crashes: an accepted rollout is committed (fsynced) before the hub answers 200,
// and marking groups trained happens in the same transaction as recording the step, so a hub
// restarted after kill -9 neither loses an acknowledged rollout nor trains on one twice.
// The schema is versioned (PRAGMA user_version) and migrated forward on open.
// Not thread-safe: one thread at a time per Ledger. The Hub reads through its own Ledger under
// its mutex and writes through a LedgerWriter (ledger_writer.h: group commit), which holds a
// second connection to the same file.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

struct sqlite3;

namespace stoa::hub {

struct WorkerRow {
  std::string id;
  std::string name;
  std::string session_token;  // the hub stores its SHA-256 (net/secret.h), never the token
  int64_t joined_ms = 0;
  int64_t last_seen_ms = 0;
  std::string secret_hash;         // SHA-256 of the worker secret: the proof a resume must show
  std::string token_name;          // the join token it joined with (revoking it ends the session)
  int64_t session_expires_ms = 0;  // the session token is refused after this
};

// A named join token (`stoa hub token add`): workers join with a `work` token; an `operator`
// token opens the dashboard, /v1/status and /metrics. Only the SHA-256 of the token is kept.
struct JoinTokenRow {
  std::string name;
  std::string token_hash;
  std::string scope;  // "work" | "operator"
  int64_t created_ms = 0;
  int64_t revoked_ms = 0;  // 0: valid
};

// open: leases out or waiting for samples · complete: G accepted, waiting for the trainer ·
// trained / dropped: closed for good.
enum class GroupStatus { kOpen, kComplete, kTrained, kDropped };
const char* group_status_name(GroupStatus status);
GroupStatus parse_group_status(const std::string& name);

struct GroupRow {
  std::string id;
  std::string prompt_id;
  int64_t prompt_index = 0;  // into the hub's prompt list
  int32_t samples = 1;       // G
  GroupStatus status = GroupStatus::kOpen;
  int64_t created_ms = 0;
  int64_t trained_step = -1;
  std::string drop_reason;
};

// kRevoked: taken back from a worker that held it without submitting (hub.cpp, hoarding); unlike
// an expired lease's, its late rollouts are refused.
enum class LeaseState { kOpen, kExpired, kReleased, kDone, kRevoked };
const char* lease_state_name(LeaseState state);
LeaseState parse_lease_state(const std::string& name);

struct LeaseRow {
  std::string id;
  std::string group_id;
  std::string worker_id;
  int32_t samples = 1;
  LeaseState state = LeaseState::kOpen;
  int64_t issued_ms = 0;
  int64_t deadline_ms = 0;
  int64_t max_deadline_ms = 0;  // renewals never move the deadline past this
  uint64_t issued_at_version = 0;
};

struct RolloutRow {
  std::string id;
  std::string group_id;
  std::string lease_id;
  std::string worker_id;
  double reward = 0;
  uint64_t min_version = 0;
  uint64_t max_version = 0;
  int64_t tokens = 0;
  int64_t accepted_ms = 0;
  std::string payload;  // the submission as JSON (net/protocol.h)
};

struct VersionRow {
  uint64_t version = 0;
  std::string state_hash;
  int64_t published_ms = 0;
  std::string blobs_json;  // the catalog entries published with it
};

class Ledger {
 public:
  static constexpr int kSchemaVersion = 2;

  explicit Ledger(const std::string& path);  // creates or opens and migrates; throws kIo/kBadFormat
  ~Ledger();
  Ledger(const Ledger&) = delete;
  Ledger& operator=(const Ledger&) = delete;

  int schema_version() const;
  const std::string& path() const { return path_; }

  // Runs fn inside BEGIN IMMEDIATE ... COMMIT (ROLLBACK and rethrow on an exception, the
  // COMMIT's own included: a failed COMMIT can leave the transaction open, and the group commit
  // retries the whole transaction).
  template <typename Fn>
  void transaction(Fn&& fn) {
    begin();
    try {
      fn();
      commit();
    } catch (...) {
      rollback();
      throw;
    }
  }

  void put_worker(const WorkerRow& row);  // insert or replace
  void touch_worker(const std::string& id, int64_t now_ms);
  std::vector<WorkerRow> workers() const;
  std::optional<WorkerRow> worker(const std::string& id) const;
  void delete_worker(const std::string& id);

  void put_join_token(const JoinTokenRow& row);  // insert or replace
  std::vector<JoinTokenRow> join_tokens() const;
  // Marks the token revoked; false when no token has that name.
  bool revoke_join_token(const std::string& name, int64_t now_ms);
  // Changes whenever another connection (`stoa hub token revoke`) commits (PRAGMA data_version).
  int64_t data_version() const;

  void put_group(const GroupRow& row);  // insert or replace
  void set_group_status(const std::string& id, GroupStatus status, int64_t trained_step = -1,
                        const std::string& drop_reason = "");
  std::vector<GroupRow> groups() const;

  void put_lease(const LeaseRow& row);  // insert or replace
  std::vector<LeaseRow> leases(bool open_only) const;

  // Inserts an accepted rollout. With autocommit (outside transaction()) it is durable on return.
  void insert_rollout(const RolloutRow& row);
  std::optional<RolloutRow> rollout(const std::string& id) const;
  std::vector<RolloutRow> rollouts_of_group(const std::string& group_id) const;
  // (group id, accepted count) for every group with at least one rollout.
  std::vector<std::pair<std::string, int64_t>> rollout_counts() const;
  int64_t rollout_count() const;

  void put_version(const VersionRow& row);
  std::vector<VersionRow> versions() const;

  void put_step(int64_t step, int64_t ms, const std::string& report_json);
  int64_t last_step() const;  // 0 when none

  std::optional<std::string> meta(const std::string& key) const;
  void set_meta(const std::string& key, const std::string& value);

  // Quarantined workers (replay verification; ledger_verification.cpp): kept across restarts so
  // a caught worker stays refused. The table is created on first use.
  void put_quarantine(const std::string& worker_id, const std::string& reason, int64_t now_ms);
  std::vector<std::pair<std::string, std::string>> quarantined() const;  // (worker id, reason)

 private:
  void exec(const char* sql) const;
  void migrate();
  void begin();
  void commit();
  void rollback();

  std::string path_;
  sqlite3* db_ = nullptr;
};

}  // namespace stoa::hub
