// The ledger's replay-verification table (docs/design/verification.md): quarantined workers, so a
// restarted hub keeps refusing them. Apart from the schema migrations on purpose: the table is
// created on first use (CREATE TABLE IF NOT EXISTS), which leaves older ledgers readable and the
// schema version alone. Quarantines are written through the hub's group commit (LedgerWriter).
#include <sqlite3.h>

#include "core/error.h"
#include "roles/hub/ledger/ledger.h"

namespace stoa::hub {
namespace {

constexpr const char* kCreate =
    "CREATE TABLE IF NOT EXISTS quarantine(worker_id TEXT PRIMARY KEY, reason TEXT NOT NULL,"
    " quarantined_ms INTEGER NOT NULL)";

void create_table(sqlite3* db, const std::string& path) {
  char* message = nullptr;
  const int rc = sqlite3_exec(db, kCreate, nullptr, nullptr, &message);
  const std::string why = message ? message : "";
  sqlite3_free(message);
  STOA_CHECK(rc == SQLITE_OK, ErrorKind::kIo, "ledger ", path, ": ", why);
}

}  // namespace

void Ledger::put_quarantine(const std::string& worker_id, const std::string& reason,
                            int64_t now_ms) {
  create_table(db_, path_);
  sqlite3_stmt* s = nullptr;
  STOA_CHECK(sqlite3_prepare_v2(db_,
                                "INSERT OR REPLACE INTO quarantine(worker_id,reason,quarantined_ms)"
                                " VALUES(?,?,?)",
                                -1, &s, nullptr) == SQLITE_OK,
             ErrorKind::kInternal, "ledger ", path_, ": ", sqlite3_errmsg(db_));
  sqlite3_bind_text(s, 1, worker_id.data(), static_cast<int>(worker_id.size()), SQLITE_TRANSIENT);
  sqlite3_bind_text(s, 2, reason.data(), static_cast<int>(reason.size()), SQLITE_TRANSIENT);
  sqlite3_bind_int64(s, 3, now_ms);
  const int rc = sqlite3_step(s);
  sqlite3_finalize(s);
  STOA_CHECK(rc == SQLITE_DONE, ErrorKind::kIo, "ledger ", path_, ": ", sqlite3_errmsg(db_));
}

std::vector<std::pair<std::string, std::string>> Ledger::quarantined() const {
  create_table(db_, path_);
  sqlite3_stmt* s = nullptr;
  STOA_CHECK(sqlite3_prepare_v2(db_, "SELECT worker_id,reason FROM quarantine ORDER BY worker_id",
                                -1, &s, nullptr) == SQLITE_OK,
             ErrorKind::kInternal, "ledger ", path_, ": ", sqlite3_errmsg(db_));
  std::vector<std::pair<std::string, std::string>> out;
  auto text = [&](int c) {
    auto* p = sqlite3_column_text(s, c);
    return p ? std::string(reinterpret_cast<const char*>(p),
                           static_cast<size_t>(sqlite3_column_bytes(s, c)))
             : std::string();
  };
  int rc;
  while ((rc = sqlite3_step(s)) == SQLITE_ROW) out.emplace_back(text(0), text(1));
  sqlite3_finalize(s);
  STOA_CHECK(rc == SQLITE_DONE, ErrorKind::kIo, "ledger ", path_, ": ", sqlite3_errmsg(db_));
  return out;
}

}  // namespace stoa::hub
