// kill -9 a worker in the middle of its rollouts: its open lease expires and the group is
// reissued to the other worker, training continues, and nothing the killed worker had submitted
// is lost or counted twice — checked in the ledger. The worker then restarts from its state dir
// (same worker id; rollouts it had not yet handed over are resent from its spool, idempotently).
#include <signal.h>
#include <sqlite3.h>

#include <set>

#include "integration/cluster.h"

namespace stoa::integration {
namespace {

std::string worker_id_of(const Cluster& c, const std::string& name) {
  std::string id = read_text(c.dir() / ("state-" + name) / "worker_id");
  while (!id.empty() && (id.back() == '\n' || id.back() == ' ')) id.pop_back();
  return id;
}

// The rollout ids in a worker's spool: written before upload, removed once the hub answered.
std::set<std::string> spooled_ids(const Cluster& c, const std::string& name) {
  std::set<std::string> ids;
  const fs::path spool = c.dir() / ("state-" + name) / "spool";
  if (!fs::exists(spool)) return ids;
  for (const auto& e : fs::directory_iterator(spool))
    if (e.path().extension() == ".json") ids.insert(e.path().stem().string());
  return ids;
}

// How many ledger rows hold rollout `id` (the hub must have stored it exactly once).
int64_t ledger_rows_for(const fs::path& ledger, const std::string& id) {
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(ledger.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) != SQLITE_OK) {
    sqlite3_close(db);
    throw std::runtime_error("cannot open ledger " + ledger.string());
  }
  sqlite3_busy_timeout(db, 5000);
  sqlite3_stmt* st = nullptr;
  int64_t n = -1;
  if (sqlite3_prepare_v2(db, "SELECT COUNT(*) FROM rollouts WHERE id = ?", -1, &st, nullptr) ==
      SQLITE_OK) {
    sqlite3_bind_text(st, 1, id.c_str(), -1, SQLITE_TRANSIENT);
    if (sqlite3_step(st) == SQLITE_ROW) n = sqlite3_column_int64(st, 0);
  }
  sqlite3_finalize(st);
  sqlite3_close(db);
  return n;
}

// Each wait is an event with a generous deadline; their sum (with the hub start and the stop)
// stays inside the CTest TIMEOUT in tests/integration/CMakeLists.txt, so a slow machine fails
// here with the logs instead of being killed by CTest without them.
constexpr auto kEventDeadline = 150s;

TEST(WorkerKill, LeaseIsReissuedAndNothingIsLostOrDoubleCounted) {
  if (!have_stoa_run()) GTEST_SKIP() << "`stoa run` is absent (a torch-OFF build): skipped";
  RunSpec spec;
  spec.lease_ttl_s = 3;      // a dead worker's lease expires quickly ...
  spec.max_new_tokens = 24;  // ... and rollouts are long enough to be killed mid-way
  Cluster c("worker_kill", spec);
  c.start_hub();
  c.start_worker("victim");
  c.start_worker("survivor");

  // Kill the victim while it holds an open lease, after it has had rollouts accepted. A lease can
  // complete between the check and the SIGKILL (rollouts of the tiny model take a few hundred ms):
  // then the victim is restarted (same state dir, so the same worker) and killed again.
  std::string victim_id;
  std::set<std::string> victim_open;
  std::set<std::string> victim_spooled;
  LedgerView at_kill;
  for (int attempt = 0; attempt < 4; ++attempt) {
    if (attempt > 0) c.start_worker("victim");
    const bool armed = wait_until(
        [&] {
          auto w = c.worker_status("victim");
          if (w.is_null() || w.value("rollouts_accepted", 0) < 2) return false;
          victim_id = w["id"];
          victim_open.clear();
          for (const auto& l : read_ledger(c.ledger_path()).leases)
            if (l.worker == victim_id && l.state == "open") victim_open.insert(l.group);
          return !victim_open.empty();
        },
        kEventDeadline);
    ASSERT_TRUE(armed) << c.status().dump() << c.logs();
    c.kill_worker("victim");
    // The victim died of the SIGKILL (128 + 9), not of anything else before it.
    EXPECT_EQ(c.worker("victim").wait(0ms), std::optional<int>(128 + SIGKILL))
        << c.worker("victim").err();
    // What the victim still held: rollouts spooled but not yet answered by the hub. Some of them
    // may have reached the hub (the answer lost with the process); all must end in the ledger once.
    victim_spooled = spooled_ids(c, "victim");
    at_kill = read_ledger(c.ledger_path());
    victim_open.clear();
    for (const auto& l : at_kill.leases)
      if (l.worker == victim_id && l.state == "open") victim_open.insert(l.group);
    // The ledger can still say "open" for a lease whose last rollout the hub accepted just
    // before the kill (the lease's closing write not yet durable): such a lease never expires.
    // The hub's own count of the victim's open leases decides; none, and the victim goes again.
    const auto held = c.worker_status("victim");
    if (!victim_open.empty() && held.is_object() && held.value("leases", 0) > 0) break;
    victim_open.clear();
  }
  ASSERT_FALSE(victim_open.empty()) << "the victim finished its lease just before every kill";
  std::set<std::string> victim_rollouts;
  for (const auto& [id, w] : at_kill.rollout_worker)
    if (w == victim_id) victim_rollouts.insert(id);
  ASSERT_FALSE(victim_rollouts.empty());
  const int64_t step_at_kill = c.step();

  // The run continues: the victim's lease expires, its group goes to the survivor, steps go on.
  const bool reissued = wait_until(
      [&] {
        if (c.step() < step_at_kill + 2) return false;
        const LedgerView v = read_ledger(c.ledger_path());
        bool expired = false, taken_over = false;
        for (const auto& l : v.leases) {
          if (l.worker == victim_id && l.state == "expired" && victim_open.count(l.group))
            expired = true;
          if (l.worker != victim_id && victim_open.count(l.group)) taken_over = true;
        }
        return expired && taken_over;
      },
      kEventDeadline);
  ASSERT_TRUE(reissued) << c.status().dump() << c.logs();

  // Restart the victim from its state dir: same identity, and it works again.
  const int64_t accepted_before = c.worker_status("victim").value("rollouts_accepted", 0);
  c.start_worker("victim");
  ASSERT_TRUE(wait_until(
      [&] { return c.worker_status("victim").value("rollouts_accepted", 0) > accepted_before; },
      kEventDeadline))
      << c.logs();
  EXPECT_EQ(worker_id_of(c, "victim"), victim_id);
  EXPECT_NE(c.worker("victim").err().find("(resumed)"), std::string::npos)
      << c.worker("victim").err();
  if (!victim_spooled.empty()) {
    EXPECT_NE(c.worker("victim").err().find("spool: re-sending " +
                                            std::to_string(victim_spooled.size()) + " rollouts"),
              std::string::npos)
        << c.worker("victim").err();
  }

  c.stop_all(90s);  // (expects exit status 0 from every process)
  EXPECT_EQ(c.worker("victim").wait(0ms), std::optional<int>(0));
  const LedgerView v = read_ledger(c.ledger_path());
  const auto counters = last_json_line(c.hub().out())["counters"];
  std::printf("[worker kill] victim at the kill: %zu rollouts acknowledged, %zu spooled\n",
              victim_rollouts.size(), victim_spooled.size());
  // Nothing the hub had acknowledged to the victim was lost, and each is stored exactly once,
  // under the victim's worker id ...
  for (const auto& id : victim_rollouts) {
    EXPECT_EQ(ledger_rows_for(c.ledger_path(), id), 1) << id;
    ASSERT_TRUE(v.rollout_worker.count(id)) << id;
    EXPECT_EQ(v.rollout_worker.at(id), victim_id) << id;
  }
  // ... every rollout it had spooled was re-sent and answered: stored exactly once (it may have
  // reached the hub before the kill), or refused with a reason the restarted worker logged (its
  // lease expired with the kill and the group went to the survivor) — never silently dropped ...
  const std::string victim_log = c.worker("victim").err();
  size_t spooled_stored = 0, spooled_refused = 0;
  for (const auto& id : victim_spooled) {
    const int64_t rows = ledger_rows_for(c.ledger_path(), id);
    if (rows == 1) {
      ++spooled_stored;
      EXPECT_EQ(v.rollout_worker.at(id), victim_id) << id;
    } else {
      ++spooled_refused;
      EXPECT_EQ(rows, 0) << id;
      EXPECT_NE(victim_log.find("rollout " + id + " rejected: "), std::string::npos)
          << "spooled rollout " << id << " was neither stored nor refused\n"
          << victim_log;
    }
  }
  std::printf("[worker kill] spooled rollouts after the restart: %zu stored, %zu refused\n",
              spooled_stored, spooled_refused);
  // ... its spool was emptied by the restarted worker ...
  EXPECT_TRUE(spooled_ids(c, "victim").empty());
  // ... and nothing is counted twice: the hub's count is the ledger's, no group holds more than
  // G rollouts, no group is in two steps.
  EXPECT_EQ(counters["rollouts_accepted"].get<double>(),
            static_cast<double>(v.rollout_group.size()));
  for (const auto& [g, n] : v.group_rollouts) EXPECT_LE(n, v.group_samples.at(g)) << g;
  std::set<std::string> unique(v.step_group_ids.begin(), v.step_group_ids.end());
  EXPECT_EQ(unique.size(), v.step_group_ids.size()) << "a group was trained twice";
  for (const auto& g : v.step_group_ids) EXPECT_EQ(v.group_status.at(g), "trained") << g;
  EXPECT_GE(v.leases_expired, 1);
}

}  // namespace
}  // namespace stoa::integration
