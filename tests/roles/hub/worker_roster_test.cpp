// The workers the hub knows (roles/hub/roster/worker_roster.h): a join lists a worker with its
// token and address (an in-process join keeps the address), a restart restores it from its
// ledger row, a heartbeat updates only a listed worker, the idle scan runs at most once a second
// unless asked and names only workers past the expiry, and the run ends once, counting the
// recent workers no answer told of it.
#include "roles/hub/roster/worker_roster.h"

#include <gtest/gtest.h>

namespace stoa::hub {
namespace {

WorkerRow row(const std::string& id, const std::string& token = "work") {
  WorkerRow r;
  r.id = id;
  r.name = "name-" + id;
  r.token_name = token;
  return r;
}

TEST(WorkerRoster, AJoinListsTheWorkerAndAnInProcessOneKeepsItsAddress) {
  WorkerRoster roster;
  WorkerStats& w = roster.joined(row("w1"), "10.0.0.1", 500);
  EXPECT_EQ(w.name, "name-w1");
  EXPECT_EQ(w.token_name, "work");
  EXPECT_EQ(w.address, "10.0.0.1");
  EXPECT_EQ(w.last_seen_ms, 500);
  EXPECT_EQ(w.session_issued_ms, 500);
  roster.accepted("w1");
  roster.joined(row("w1", "other"), "", 900);  // resumed in-process
  const WorkerStats* again = roster.find("w1");
  ASSERT_NE(again, nullptr);
  EXPECT_EQ(again->address, "10.0.0.1");
  EXPECT_EQ(again->token_name, "other");
  EXPECT_EQ(again->rollouts_accepted, 1);  // a resume keeps what it earned
  roster.accepted("stranger");             // never listed: ignored
  EXPECT_EQ(roster.size(), 1u);
}

TEST(WorkerRoster, ARestartRestoresTheWorkerFromItsLedgerRow) {
  WorkerRoster roster;
  WorkerRow r = row("w1");
  r.last_seen_ms = 700;
  r.session_expires_ms = 10'000;
  roster.restore(r, 4'000);
  const WorkerStats* w = roster.find("w1");
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->last_seen_ms, 700);
  EXPECT_EQ(w->session_issued_ms, 6'000);
}

TEST(WorkerRoster, AHeartbeatUpdatesOnlyAListedWorker) {
  WorkerRoster roster;
  roster.joined(row("w1"), "", 0);
  net::Heartbeat hb;
  hb.worker_id = "w1";
  hb.version = 3;
  hb.tokens_generated = 1000;
  hb.tokens_per_s = 12.5;
  WorkerStats* w = roster.heard(hb, 2'000);
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->last_seen_ms, 2'000);
  EXPECT_EQ(w->version, 3u);
  EXPECT_EQ(w->tokens_generated, 1000u);
  EXPECT_DOUBLE_EQ(w->tokens_per_s, 12.5);
  hb.worker_id = "gone";
  EXPECT_EQ(roster.heard(hb, 2'000), nullptr);
  EXPECT_EQ(roster.size(), 1u);
}

TEST(WorkerRoster, TheIdleScanRunsAtMostOnceASecondAndNamesOnlyIdleWorkers) {
  WorkerRoster roster;
  roster.joined(row("old"), "", 1'000);
  roster.joined(row("fresh"), "", 9'000);
  EXPECT_TRUE(roster.scan_due(10'000));
  EXPECT_FALSE(roster.scan_due(10'500));
  EXPECT_TRUE(roster.scan_due(11'000));
  roster.rescan_now();
  EXPECT_TRUE(roster.scan_due(11'001));
  EXPECT_EQ(roster.idle(11'000, 5'000), (std::vector<std::string>{"old"}));
  roster.forget("old");
  EXPECT_EQ(roster.find("old"), nullptr);
  EXPECT_TRUE(roster.idle(11'000, 5'000).empty());
}

TEST(WorkerRoster, TheRunEndsOnceAndCountsRecentWorkersNotToldOfIt) {
  WorkerRoster roster;
  roster.joined(row("told"), "", 10'000);
  roster.joined(row("untold"), "", 10'000);
  roster.joined(row("long-gone"), "", 0);
  EXPECT_FALSE(roster.run_ended());
  EXPECT_TRUE(roster.end_run());
  EXPECT_FALSE(roster.end_run());
  EXPECT_TRUE(roster.run_ended());
  roster.told_run_ended("told");
  EXPECT_EQ(roster.not_told_of_end(12'000, 5'000), 1u);  // "untold"; "long-gone" is not recent
  roster.told_run_ended("untold");
  EXPECT_EQ(roster.not_told_of_end(12'000, 5'000), 0u);
}

}  // namespace
}  // namespace stoa::hub
