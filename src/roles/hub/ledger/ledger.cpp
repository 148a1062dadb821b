#include "roles/hub/ledger/ledger.h"

#include <sqlite3.h>

#include "core/enum_names.h"
#include "core/error.h"

namespace stoa::hub {
namespace {

// A prepared statement with positional binds; finalised on scope exit.
class Stmt {
 public:
  Stmt(sqlite3* db, const char* sql, const std::string& path) : db_(db), path_(path) {
    int rc = sqlite3_prepare_v2(db, sql, -1, &stmt_, nullptr);
    STOA_CHECK(rc == SQLITE_OK, ErrorKind::kInternal, "ledger ", path, ": cannot prepare '", sql,
               "': ", sqlite3_errmsg(db));
  }
  ~Stmt() { sqlite3_finalize(stmt_); }
  Stmt& bind(int i, const std::string& v) {
    sqlite3_bind_text(stmt_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
    return *this;
  }
  Stmt& bind(int i, int64_t v) {
    sqlite3_bind_int64(stmt_, i, v);
    return *this;
  }
  // Binds `values` to ?1, ?2, ... in order (each through the overload for its type).
  template <class... Values>
  Stmt& bind_all(const Values&... values) {
    int i = 0;
    (bind(++i, values), ...);
    return *this;
  }
  Stmt& bind(int i, double v) {
    sqlite3_bind_double(stmt_, i, v);
    return *this;
  }
  // true: a row is ready; false: done.
  bool step() {
    int rc = sqlite3_step(stmt_);
    if (rc == SQLITE_ROW) return true;
    STOA_CHECK(rc == SQLITE_DONE, ErrorKind::kIo, "ledger ", path_, ": ", sqlite3_errmsg(db_));
    return false;
  }
  void run() { step(); }
  std::string text(int c) const {
    auto* p = sqlite3_column_text(stmt_, c);
    return p ? std::string(reinterpret_cast<const char*>(p),
                           static_cast<size_t>(sqlite3_column_bytes(stmt_, c)))
             : std::string();
  }
  int64_t i64(int c) const { return sqlite3_column_int64(stmt_, c); }
  double f64(int c) const { return sqlite3_column_double(stmt_, c); }

 private:
  sqlite3* db_;
  sqlite3_stmt* stmt_ = nullptr;
  const std::string& path_;
};

// Forward migrations, index i brings the schema from version i to i + 1.
const char* const kMigrations[] = {
    R"sql(
CREATE TABLE workers(id TEXT PRIMARY KEY, name TEXT NOT NULL, session_token TEXT NOT NULL,
                     joined_ms INTEGER NOT NULL, last_seen_ms INTEGER NOT NULL);
CREATE TABLE groups(id TEXT PRIMARY KEY, prompt_id TEXT NOT NULL, prompt_index INTEGER NOT NULL,
                    samples INTEGER NOT NULL, status TEXT NOT NULL, created_ms INTEGER NOT NULL,
                    trained_step INTEGER NOT NULL, drop_reason TEXT NOT NULL);
CREATE TABLE leases(id TEXT PRIMARY KEY, group_id TEXT NOT NULL, worker_id TEXT NOT NULL,
                    samples INTEGER NOT NULL, state TEXT NOT NULL, issued_ms INTEGER NOT NULL,
                    deadline_ms INTEGER NOT NULL, max_deadline_ms INTEGER NOT NULL,
                    issued_at_version INTEGER NOT NULL);
CREATE INDEX leases_state ON leases(state);
CREATE TABLE rollouts(id TEXT PRIMARY KEY, group_id TEXT NOT NULL, lease_id TEXT NOT NULL,
                      worker_id TEXT NOT NULL, reward REAL NOT NULL, min_version INTEGER NOT NULL,
                      max_version INTEGER NOT NULL, tokens INTEGER NOT NULL,
                      accepted_ms INTEGER NOT NULL, payload TEXT NOT NULL);
CREATE INDEX rollouts_group ON rollouts(group_id);
CREATE TABLE versions(version INTEGER PRIMARY KEY, state_hash TEXT NOT NULL,
                      published_ms INTEGER NOT NULL, blobs TEXT NOT NULL);
CREATE TABLE steps(step INTEGER PRIMARY KEY, ms INTEGER NOT NULL, report TEXT NOT NULL);
CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
)sql",
    // 2: identity (issue 18). The session_token column now holds the token's SHA-256.
    R"sql(
ALTER TABLE workers ADD COLUMN secret_hash TEXT NOT NULL DEFAULT '';
ALTER TABLE workers ADD COLUMN token_name TEXT NOT NULL DEFAULT '';
ALTER TABLE workers ADD COLUMN session_expires_ms INTEGER NOT NULL DEFAULT 0;
CREATE TABLE join_tokens(name TEXT PRIMARY KEY, token_hash TEXT NOT NULL, scope TEXT NOT NULL,
                         created_ms INTEGER NOT NULL, revoked_ms INTEGER NOT NULL);
)sql",
};

}  // namespace

constexpr EnumName<GroupStatus> kGroupStatusNames[] = {{GroupStatus::kOpen, "open"},
                                                       {GroupStatus::kComplete, "complete"},
                                                       {GroupStatus::kTrained, "trained"},
                                                       {GroupStatus::kDropped, "dropped"}};

const char* group_status_name(GroupStatus s) {
  return enum_name(kGroupStatusNames, s);
}
GroupStatus parse_group_status(const std::string& n) {
  if (auto status = enum_from_name(kGroupStatusNames, n)) return *status;
  fail(ErrorKind::kBadFormat, "ledger: unknown group status '", n, "'");
}
constexpr EnumName<LeaseState> kLeaseStateNames[] = {{LeaseState::kOpen, "open"},
                                                     {LeaseState::kExpired, "expired"},
                                                     {LeaseState::kReleased, "released"},
                                                     {LeaseState::kDone, "done"},
                                                     {LeaseState::kRevoked, "revoked"}};

const char* lease_state_name(LeaseState s) {
  return enum_name(kLeaseStateNames, s);
}
LeaseState parse_lease_state(const std::string& n) {
  if (auto state = enum_from_name(kLeaseStateNames, n)) return *state;
  fail(ErrorKind::kBadFormat, "ledger: unknown lease state '", n, "'");
}

Ledger::Ledger(const std::string& path) : path_(path) {
  int rc =
      sqlite3_open_v2(path.c_str(), &db_,
                      SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX, nullptr);
  if (rc != SQLITE_OK) {
    std::string msg = db_ ? sqlite3_errmsg(db_) : "out of memory";
    sqlite3_close(db_);
    db_ = nullptr;
    fail(ErrorKind::kIo, "ledger ", path, ": cannot open: ", msg);
  }
  sqlite3_busy_timeout(db_, 5000);
  try {
    // WAL: readers (status page) never block the intake writer. synchronous=FULL: a commit is
    // on disk when it returns, which is what "durable before the HTTP 200" needs (NORMAL
    // would only protect against application crashes, not power loss).
    exec("PRAGMA journal_mode=WAL");
    exec("PRAGMA synchronous=FULL");
    exec("PRAGMA foreign_keys=ON");
    migrate();
  } catch (...) {
    sqlite3_close(db_);
    db_ = nullptr;
    throw;
  }
}

Ledger::~Ledger() {
  if (db_) sqlite3_close(db_);
}

void Ledger::exec(const char* sql) const {
  char* err = nullptr;
  int rc = sqlite3_exec(db_, sql, nullptr, nullptr, &err);
  if (rc != SQLITE_OK) {
    std::string msg = err ? err : sqlite3_errmsg(db_);
    sqlite3_free(err);
    fail(rc == SQLITE_NOTADB || rc == SQLITE_CORRUPT ? ErrorKind::kBadFormat : ErrorKind::kIo,
         "ledger ", path_, ": ", msg);
  }
}

int Ledger::schema_version() const {
  Stmt s(db_, "PRAGMA user_version", path_);
  s.step();
  return static_cast<int>(s.i64(0));
}

void Ledger::migrate() {
  int have = schema_version();
  constexpr int n = static_cast<int>(sizeof(kMigrations) / sizeof(kMigrations[0]));
  static_assert(n == kSchemaVersion);
  STOA_CHECK(have <= n, ErrorKind::kUnsupported, "ledger ", path_, ": schema version ", have,
             " is newer than this hub's (", n, ")");
  for (int v = have; v < n; ++v) {
    transaction([&] {
      exec(kMigrations[v]);
      exec(cat("PRAGMA user_version=", v + 1).c_str());
    });
  }
}

void Ledger::begin() {
  exec("BEGIN IMMEDIATE");
}
void Ledger::commit() {
  exec("COMMIT");
}
void Ledger::rollback() {
  sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
}

void Ledger::put_worker(const WorkerRow& r) {
  Stmt(db_,
       "INSERT OR REPLACE INTO workers(id,name,session_token,joined_ms,last_seen_ms,secret_hash,"
       "token_name,session_expires_ms) VALUES(?,?,?,?,?,?,?,?)",
       path_)
      .bind_all(r.id, r.name, r.session_token, r.joined_ms, r.last_seen_ms, r.secret_hash,
                r.token_name, r.session_expires_ms)
      .run();
}

void Ledger::touch_worker(const std::string& id, int64_t now_ms) {
  Stmt(db_, "UPDATE workers SET last_seen_ms=? WHERE id=?", path_).bind_all(now_ms, id).run();
}

namespace {
constexpr const char* kWorkerColumns =
    "SELECT id,name,session_token,joined_ms,last_seen_ms,secret_hash,token_name,"
    "session_expires_ms FROM workers";
WorkerRow read_worker(const Stmt& s) {
  return {s.text(0), s.text(1), s.text(2), s.i64(3), s.i64(4), s.text(5), s.text(6), s.i64(7)};
}
}  // namespace

std::vector<WorkerRow> Ledger::workers() const {
  Stmt s(db_, kWorkerColumns, path_);
  std::vector<WorkerRow> out;
  while (s.step()) out.push_back(read_worker(s));
  return out;
}

std::optional<WorkerRow> Ledger::worker(const std::string& id) const {
  Stmt s(db_, cat(kWorkerColumns, " WHERE id=?").c_str(), path_);
  s.bind(1, id);
  if (!s.step()) return std::nullopt;
  return read_worker(s);
}

void Ledger::delete_worker(const std::string& id) {
  Stmt(db_, "DELETE FROM workers WHERE id=?", path_).bind(1, id).run();
}

void Ledger::put_join_token(const JoinTokenRow& r) {
  Stmt(db_, "INSERT OR REPLACE INTO join_tokens VALUES(?,?,?,?,?)", path_)
      .bind_all(r.name, r.token_hash, r.scope, r.created_ms, r.revoked_ms)
      .run();
}

std::vector<JoinTokenRow> Ledger::join_tokens() const {
  Stmt s(db_,
         "SELECT name,token_hash,scope,created_ms,revoked_ms FROM join_tokens ORDER BY created_ms,"
         " name",
         path_);
  std::vector<JoinTokenRow> out;
  while (s.step()) out.push_back({s.text(0), s.text(1), s.text(2), s.i64(3), s.i64(4)});
  return out;
}

bool Ledger::revoke_join_token(const std::string& name, int64_t now_ms) {
  Stmt(db_, "UPDATE join_tokens SET revoked_ms=? WHERE name=? AND revoked_ms=0", path_)
      .bind_all(now_ms, name)
      .run();
  Stmt s(db_, "SELECT COUNT(*) FROM join_tokens WHERE name=?", path_);
  s.bind(1, name);
  s.step();
  return s.i64(0) > 0;
}

int64_t Ledger::data_version() const {
  Stmt s(db_, "PRAGMA data_version", path_);
  s.step();
  return s.i64(0);
}

void Ledger::put_group(const GroupRow& r) {
  Stmt(db_, "INSERT OR REPLACE INTO groups VALUES(?,?,?,?,?,?,?,?)", path_)
      .bind_all(r.id, r.prompt_id, r.prompt_index, static_cast<int64_t>(r.samples),
                std::string(group_status_name(r.status)), r.created_ms, r.trained_step,
                r.drop_reason)
      .run();
}

void Ledger::set_group_status(const std::string& id, GroupStatus status, int64_t trained_step,
                              const std::string& drop_reason) {
  Stmt(db_, "UPDATE groups SET status=?, trained_step=?, drop_reason=? WHERE id=?", path_)
      .bind_all(std::string(group_status_name(status)), trained_step, drop_reason, id)
      .run();
}

std::vector<GroupRow> Ledger::groups() const {
  Stmt s(db_,
         "SELECT id,prompt_id,prompt_index,samples,status,created_ms,trained_step,drop_reason "
         "FROM groups ORDER BY created_ms, rowid",
         path_);
  std::vector<GroupRow> out;
  while (s.step()) {
    out.push_back({s.text(0), s.text(1), s.i64(2), static_cast<int32_t>(s.i64(3)),
                   parse_group_status(s.text(4)), s.i64(5), s.i64(6), s.text(7)});
  }
  return out;
}

void Ledger::put_lease(const LeaseRow& r) {
  Stmt(db_, "INSERT OR REPLACE INTO leases VALUES(?,?,?,?,?,?,?,?,?)", path_)
      .bind_all(r.id, r.group_id, r.worker_id, static_cast<int64_t>(r.samples),
                std::string(lease_state_name(r.state)), r.issued_ms, r.deadline_ms,
                r.max_deadline_ms, static_cast<int64_t>(r.issued_at_version))
      .run();
}

std::vector<LeaseRow> Ledger::leases(bool open_only) const {
  Stmt s(db_,
         open_only ? "SELECT * FROM leases WHERE state='open' ORDER BY issued_ms, rowid"
                   : "SELECT * FROM leases ORDER BY issued_ms, rowid",
         path_);
  std::vector<LeaseRow> out;
  while (s.step()) {
    out.push_back({s.text(0), s.text(1), s.text(2), static_cast<int32_t>(s.i64(3)),
                   parse_lease_state(s.text(4)), s.i64(5), s.i64(6), s.i64(7),
                   static_cast<uint64_t>(s.i64(8))});
  }
  return out;
}

void Ledger::insert_rollout(const RolloutRow& r) {
  Stmt(db_, "INSERT INTO rollouts VALUES(?,?,?,?,?,?,?,?,?,?)", path_)
      .bind_all(r.id, r.group_id, r.lease_id, r.worker_id, r.reward,
                static_cast<int64_t>(r.min_version), static_cast<int64_t>(r.max_version), r.tokens,
                r.accepted_ms, r.payload)
      .run();
}

namespace {
RolloutRow read_rollout(const Stmt& s) {
  return {s.text(0),
          s.text(1),
          s.text(2),
          s.text(3),
          s.f64(4),
          static_cast<uint64_t>(s.i64(5)),
          static_cast<uint64_t>(s.i64(6)),
          s.i64(7),
          s.i64(8),
          s.text(9)};
}
}  // namespace

std::optional<RolloutRow> Ledger::rollout(const std::string& id) const {
  Stmt s(db_, "SELECT * FROM rollouts WHERE id=?", path_);
  s.bind(1, id);
  if (!s.step()) return std::nullopt;
  return read_rollout(s);
}

std::vector<RolloutRow> Ledger::rollouts_of_group(const std::string& group_id) const {
  Stmt s(db_, "SELECT * FROM rollouts WHERE group_id=? ORDER BY accepted_ms, rowid", path_);
  s.bind(1, group_id);
  std::vector<RolloutRow> out;
  while (s.step()) out.push_back(read_rollout(s));
  return out;
}

std::vector<std::pair<std::string, int64_t>> Ledger::rollout_counts() const {
  Stmt s(db_, "SELECT group_id, COUNT(*) FROM rollouts GROUP BY group_id", path_);
  std::vector<std::pair<std::string, int64_t>> out;
  while (s.step()) out.emplace_back(s.text(0), s.i64(1));
  return out;
}

int64_t Ledger::rollout_count() const {
  Stmt s(db_, "SELECT COUNT(*) FROM rollouts", path_);
  s.step();
  return s.i64(0);
}

void Ledger::put_version(const VersionRow& r) {
  Stmt(db_, "INSERT OR REPLACE INTO versions VALUES(?,?,?,?)", path_)
      .bind_all(static_cast<int64_t>(r.version), r.state_hash, r.published_ms, r.blobs_json)
      .run();
}

std::vector<VersionRow> Ledger::versions() const {
  Stmt s(db_, "SELECT version,state_hash,published_ms,blobs FROM versions ORDER BY version", path_);
  std::vector<VersionRow> out;
  while (s.step()) out.push_back({static_cast<uint64_t>(s.i64(0)), s.text(1), s.i64(2), s.text(3)});
  return out;
}

void Ledger::put_step(int64_t step, int64_t ms, const std::string& report_json) {
  Stmt(db_, "INSERT OR REPLACE INTO steps VALUES(?,?,?)", path_)
      .bind_all(step, ms, report_json)
      .run();
}

int64_t Ledger::last_step() const {
  Stmt s(db_, "SELECT COALESCE(MAX(step),0) FROM steps", path_);
  s.step();
  return s.i64(0);
}

std::optional<std::string> Ledger::meta(const std::string& key) const {
  Stmt s(db_, "SELECT value FROM meta WHERE key=?", path_);
  s.bind(1, key);
  if (!s.step()) return std::nullopt;
  return s.text(0);
}

void Ledger::set_meta(const std::string& key, const std::string& value) {
  Stmt(db_, "INSERT OR REPLACE INTO meta VALUES(?,?)", path_).bind_all(key, value).run();
}

}  // namespace stoa::hub
