// kill -9 a worker in the middle of its rollouts: its open lease expires and the group is
// reissued to the other worker, training continues, and nothing the killed worker had submitted
// is lost or counted twice — checked in the ledger. The worker then restarts from its state dir
// (same worker id; rollouts it had not yet handed over are resent from its spool, idempotently).
#include <signal.h>

#include <set>

#include "integration/cluster.h"

namespace stoa::integration {
namespace {

std::string worker_id_of(const Cluster& c, const std::string& name) {
  std::string id = read_file(c.dir() / ("state-" + name) / "worker_id");
  while (!id.empty() && (id.back() == '\n' || id.back() == ' ')) id.pop_back();
  return id;
}

TEST(WorkerKill, LeaseIsReissuedAndNothingIsLostOrDoubleCounted) {
  if (!have_stoa_run()) GTEST_SKIP() << "`stoa run` is absent (a torch-OFF build): skipped";
  RunSpec spec;
  spec.lease_ttl_s = 3;      // a dead worker's lease expires quickly ...
  spec.max_new_tokens = 24;  // ... and rollouts are long enough to be killed mid-way
  Cluster c("worker_kill", spec);
  c.start_hub();
  c.start_worker("victim");
  c.start_worker("survivor");

  // Kill the victim while it holds an open lease, after it has had rollouts accepted.
  std::string victim_id;
  std::set<std::string> victim_open;
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
      120s);
  ASSERT_TRUE(armed) << c.status().dump() << c.logs();
  c.kill_worker("victim");
  const LedgerView at_kill = read_ledger(c.ledger_path());
  victim_open.clear();
  for (const auto& l : at_kill.leases)
    if (l.worker == victim_id && l.state == "open") victim_open.insert(l.group);
  ASSERT_FALSE(victim_open.empty()) << "the victim finished its lease just before the kill";
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
      120s);
  ASSERT_TRUE(reissued) << c.status().dump() << c.logs();

  // Restart the victim from its state dir: same identity, and it works again.
  const int64_t accepted_before = c.worker_status("victim").value("rollouts_accepted", 0);
  c.start_worker("victim");
  ASSERT_TRUE(wait_until(
      [&] { return c.worker_status("victim").value("rollouts_accepted", 0) > accepted_before; },
      120s))
      << c.logs();
  EXPECT_EQ(worker_id_of(c, "victim"), victim_id);
  EXPECT_NE(c.worker("victim").err().find("(resumed)"), std::string::npos)
      << c.worker("victim").err();

  c.stop_all();
  const LedgerView v = read_ledger(c.ledger_path());
  const auto counters = last_json_line(c.hub().out())["counters"];
  // Nothing the victim had handed over was lost ...
  for (const auto& id : victim_rollouts) EXPECT_TRUE(v.rollout_group.count(id)) << id;
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
