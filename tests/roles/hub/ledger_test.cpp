#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include <sqlite3.h>

#include "core/error.h"
#include "net/protocol.h"
#include "roles/hub/ledger/ledger.h"
#include "support/error_of.h"

namespace stoa::hub {
namespace {

std::string temp_db() {
  auto p = std::filesystem::temp_directory_path() /
           ("stoa_ledger_" + net::random_token().substr(0, 10) + ".sqlite");
  return p.string();
}

void remove_db(const std::string& p) {
  for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(p + suffix);
}

TEST(Ledger, CreatesSchemaAndSurvivesReopen) {
  auto path = temp_db();
  {
    Ledger l(path);
    EXPECT_EQ(l.schema_version(), Ledger::kSchemaVersion);
    l.put_worker({"w1", "laptop", "tok", 10, 11, "secret-hash", "default", 12});
    l.put_group({"g1", "q1", 0, 4, GroupStatus::kOpen, 5, -1, ""});
    l.put_lease({"l1", "g1", "w1", 4, LeaseState::kOpen, 5, 100, 200, 3});
    l.insert_rollout({"r1", "g1", "l1", "w1", 1.0, 3, 4, 17, 99, "{\"x\":1}"});
    l.put_version({3, "abc", 7, "[]"});
    l.put_step(1, 8, "{}");
    l.set_meta("next_prompt", "1");
  }
  {
    // A fresh connection sees everything: each autocommitted write was durable.
    Ledger l(path);
    EXPECT_EQ(l.schema_version(), Ledger::kSchemaVersion);
    ASSERT_EQ(l.workers().size(), 1u);
    EXPECT_EQ(l.workers()[0].session_token, "tok");
    EXPECT_EQ(l.worker("w1")->secret_hash, "secret-hash");
    EXPECT_EQ(l.worker("w1")->session_expires_ms, 12);
    EXPECT_FALSE(l.worker("w2").has_value());
    ASSERT_EQ(l.groups().size(), 1u);
    EXPECT_EQ(l.groups()[0].samples, 4);
    ASSERT_EQ(l.leases(true).size(), 1u);
    EXPECT_EQ(l.leases(true)[0].max_deadline_ms, 200);
    auto r = l.rollout("r1");
    ASSERT_TRUE(r.has_value());
    EXPECT_EQ(r->payload, "{\"x\":1}");
    EXPECT_EQ(r->min_version, 3u);
    EXPECT_EQ(l.rollout_count(), 1);
    EXPECT_EQ(l.versions().at(0).state_hash, "abc");
    EXPECT_EQ(l.last_step(), 1);
    EXPECT_EQ(l.meta("next_prompt").value_or(""), "1");
  }
  remove_db(path);
}

TEST(Ledger, RolloutIdIsUniqueAndTransactionsRollBack) {
  auto path = temp_db();
  Ledger l(path);
  RolloutRow row{"r1", "g1", "l1", "w1", 0.0, 1, 1, 5, 1, "{}"};
  l.insert_rollout(row);
  // The primary key is the idempotency key: a second insert of the same id fails.
  EXPECT_THROW(l.insert_rollout(row), Error);
  EXPECT_THROW(l.transaction([&] {
    l.insert_rollout({"r2", "g1", "l1", "w1", 0.0, 1, 1, 5, 1, "{}"});
    throw Error(ErrorKind::kInternal, "boom");
  }),
               Error);
  EXPECT_FALSE(l.rollout("r2").has_value());
  EXPECT_EQ(l.rollout_count(), 1);
  remove_db(path);
}

TEST(Ledger, GroupStatusTransitions) {
  auto path = temp_db();
  Ledger l(path);
  l.put_group({"g1", "q1", 0, 2, GroupStatus::kOpen, 1, -1, ""});
  l.set_group_status("g1", GroupStatus::kTrained, 7);
  auto g = l.groups().at(0);
  EXPECT_EQ(g.status, GroupStatus::kTrained);
  EXPECT_EQ(g.trained_step, 7);
  l.set_group_status("g1", GroupStatus::kDropped, -1, "stale");
  EXPECT_EQ(l.groups().at(0).drop_reason, "stale");
  remove_db(path);
}

TEST(Ledger, RefusesAFileThatIsNotADatabase) {
  auto path = temp_db();
  {
    std::ofstream f(path, std::ios::binary);
    f << std::string(4096, 'x');
  }
  const Error garbage = stoa::test::error_of([&] { Ledger l(path); }, "opened garbage");
  EXPECT_NE(std::string(garbage.what()).find(path), std::string::npos) << garbage.what();
  remove_db(path);
}

TEST(Ledger, JoinTokensAreNamedRevocableAndSeenByOtherConnections) {
  auto path = temp_db();
  Ledger hub(path), cli(path);
  const int64_t before = hub.data_version();
  cli.put_join_token({"guest", "hash", "work", 5, 0});
  EXPECT_NE(hub.data_version(), before);  // the hub notices another process's write
  ASSERT_EQ(hub.join_tokens().size(), 1u);
  EXPECT_EQ(hub.join_tokens()[0].revoked_ms, 0);
  EXPECT_TRUE(cli.revoke_join_token("guest", 9));
  EXPECT_FALSE(cli.revoke_join_token("nobody", 9));
  EXPECT_EQ(hub.join_tokens()[0].revoked_ms, 9);
  hub.put_worker({"w1", "n", "t", 1, 1, "s", "guest", 2});
  hub.delete_worker("w1");
  EXPECT_TRUE(hub.workers().empty());
  remove_db(path);
}

TEST(Ledger, RefusesANewerSchema) {
  auto path = temp_db();
  { Ledger l(path); }
  {
    // Simulate a ledger written by a future hub.
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(db, "PRAGMA user_version=99", nullptr, nullptr, nullptr), SQLITE_OK);
    sqlite3_close(db);
  }
  const Error newer_schema = stoa::test::error_of([&] { Ledger l(path); }, "opened a newer schema");
  EXPECT_EQ(newer_schema.kind(), ErrorKind::kUnsupported);
  EXPECT_NE(std::string(newer_schema.what()).find("99"), std::string::npos) << newer_schema.what();
  remove_db(path);
}

}  // namespace
}  // namespace stoa::hub
