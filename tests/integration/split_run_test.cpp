// The hub and the trainer as two processes (`stoa hub` + `stoa train --hub`, issue 27 item 5):
// the trainer dials in with the trainer join string the hub wrote to hub.json, takes groups and
// publishes versions through the hub; a worker that never restarts follows. The trainer is
// killed -9 and restarted, then the hub: no group is trained twice, steps go on, and every
// version the worker switches to after the first restart comes as a patch (no anchor). Then the
// same with a trainer of two fully sharded (FSDP) ranks. And the trainer's last step ends the
// hub's run too (issue 49).
#include <set>

#include "integration/cluster.h"

namespace stoa::integration {
namespace {

// Every group id is in at most one step's report.
void expect_each_group_trained_once(const LedgerView& ledger) {
  std::set<std::string> seen;
  for (const auto& g : ledger.step_group_ids)
    EXPECT_TRUE(seen.insert(g).second) << "group " << g << " was trained twice";
}

TEST(SplitRun, HubAndTrainerApartRestartEitherSideAndLoseNothing) {
  if (!have_stoa_run()) GTEST_SKIP() << "`stoa run` is absent (a torch-OFF build): skipped";
  RunSpec spec;
  spec.port = free_port();  // the restarted hub keeps its URL
  ASSERT_GT(spec.port, 0);
  spec.anchor_every = 50;  // only the run's first version is an anchor
  Cluster c("split_run", spec);
  c.start_hub(60s, "", /*alone=*/true);
  const std::string trainer_join = c.trainer_join_string();
  ASSERT_NE(trainer_join.find("#token="), std::string::npos) << trainer_join;
  EXPECT_TRUE(fs::exists(c.run_dir() / "trainer_token")) << "made at first start";
  c.start_worker("w1");
  c.start_trainer(trainer_join);

  auto steps_reach = [&](int64_t n) {
    return wait_until(
        [&] {
          if (!c.trainer().running() || !c.hub().running()) return true;
          return read_ledger(c.ledger_path()).steps >= n;
        },
        180s);
  };
  ASSERT_TRUE(steps_reach(2)) << c.logs();
  ASSERT_TRUE(c.trainer().running() && c.hub().running()) << c.logs();

  // The trainer dies and comes back: it resumes from its checkpoint and continues the
  // published int8 view (a patch) from its own store.
  c.kill_trainer();
  const size_t log_at_kill = c.worker("w1").err().size();
  const int64_t steps_at_trainer_kill = read_ledger(c.ledger_path()).steps;
  c.start_trainer(trainer_join);
  ASSERT_TRUE(steps_reach(steps_at_trainer_kill + 2)) << c.logs();

  // The hub dies and comes back on the same port: the trainer and the worker retry through it.
  c.kill_hub();
  const int64_t steps_at_hub_kill = read_ledger(c.ledger_path()).steps;
  c.start_hub(60s, "", /*alone=*/true);
  EXPECT_EQ(c.trainer_join_string(), trainer_join) << "the trainer token is kept";
  ASSERT_TRUE(steps_reach(steps_at_hub_kill + 2)) << c.logs();
  ASSERT_TRUE(c.trainer().running() && c.worker("w1").running()) << c.logs();

  const LedgerView ledger = read_ledger(c.ledger_path());
  expect_each_group_trained_once(ledger);
  EXPECT_GE(ledger.steps, steps_at_hub_kill + 2);
  const auto switches = weight_switches(c.worker("w1").err(), log_at_kill);
  EXPECT_FALSE(switches.empty()) << "the worker followed the restarted trainer";
  for (const auto& [version, anchor] : switches)
    EXPECT_FALSE(anchor) << "version " << version << " came as an anchor after a restart";
  EXPECT_NE(c.trainer().err().find("continues the published int8 view"), std::string::npos)
      << c.trainer().err();
  c.stop_all();
}

// The trainer's last step ends the split run as it ends `stoa run`: the trainer tells the hub
// (POST /v1/trainer/finished), the hub stops leasing, tells its worker the run ended and exits;
// the worker stops. Before issue 49 the hub went on serving a run that would never train again.
TEST(SplitRun, TrainersLastStepEndsTheHubsRun) {
  if (!have_stoa_run()) GTEST_SKIP() << "`stoa run` is absent (a torch-OFF build): skipped";
  constexpr int kMaxSteps = 2;
  Cluster c("split_run_end", RunSpec{});
  c.start_hub(60s, "", /*alone=*/true);
  c.start_worker("w1");
  c.start_trainer(c.trainer_join_string(), "", {}, {"--max-steps", std::to_string(kMaxSteps)});
  const auto trainer_exit = c.trainer().wait(180s);
  ASSERT_TRUE(trainer_exit.has_value()) << c.logs();
  EXPECT_EQ(*trainer_exit, 0) << c.trainer().err();
  EXPECT_NE(c.trainer().err().find("that the run ended at step"), std::string::npos)
      << c.trainer().err();
  const auto hub_exit = c.hub().wait(60s);
  ASSERT_TRUE(hub_exit.has_value()) << "the hub went on after its trainer finished:\n" << c.logs();
  EXPECT_EQ(*hub_exit, 0) << c.hub().err();
  EXPECT_NE(c.hub().out().find("the run is finished"), std::string::npos) << c.hub().out();
  EXPECT_NE(c.hub().out().find("\"finished\":true"), std::string::npos) << c.hub().out();
  EXPECT_GE(read_ledger(c.ledger_path()).steps, kMaxSteps);
  const auto worker_exit = c.worker("w1").wait(60s);
  ASSERT_TRUE(worker_exit.has_value()) << "the worker was not told the run ended:\n" << c.logs();
  EXPECT_EQ(*worker_exit, 0) << c.worker("w1").err();
  EXPECT_NE(c.worker("w1").out().find("The run has ended"), std::string::npos)
      << c.worker("w1").out();
}

// RL on two fully sharded ranks through the same hub: every version is gathered a unit at a time
// for the PULSE publisher on rank 0, and the worker follows the versions they make.
TEST(SplitRun, TwoFsdpRanksTrainAndPublishThroughTheHub) {
  if (!have_stoa_run()) GTEST_SKIP() << "`stoa run` is absent (a torch-OFF build): skipped";
  RunSpec spec;
  spec.adjust = [](run::RunConfig& config) { config.train.sharding = train::Sharding::kFsdp; };
  Cluster c("split_run_fsdp", spec);
  c.start_hub(60s, "", /*alone=*/true);
  c.start_worker("w1");
  const fs::path memory = c.dir() / "memory";
  c.start_trainer(c.trainer_join_string(), "", {},
                  {"--nproc", "2", "--memory-report", memory.string()});
  ASSERT_TRUE(wait_until(
      [&] {
        if (!c.trainer().running() || !c.hub().running()) return true;
        return read_ledger(c.ledger_path()).steps >= 3 &&
               weight_switches(c.worker("w1").err(), 0).size() >= 2;
      },
      240s))
      << c.logs();
  ASSERT_TRUE(c.trainer().running()) << c.logs();
  expect_each_group_trained_once(read_ledger(c.ledger_path()));
  EXPECT_NE(c.trainer().err().find("rank 1 of 2"), std::string::npos) << c.trainer().err();
  EXPECT_NE(c.trainer().err().find("[fsdp]"), std::string::npos) << c.trainer().err();
  c.stop_all();
  // Both ranks report their peak memory after a clean stop, rank 0 (the RL loop) included.
  EXPECT_TRUE(fs::exists(memory / "rank-0.json")) << c.logs();
  EXPECT_TRUE(fs::exists(memory / "rank-1.json")) << c.logs();
}

}  // namespace
}  // namespace stoa::integration
