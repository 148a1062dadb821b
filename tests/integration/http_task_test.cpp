// A task without C++ and without anything on the volunteers' machines, end to end with real
// processes: the reference Python environment (envs/arithmetic) beside `stoa run`, whose run
// config names the "http" task; two `stoa work` workers given no task options, so every prompt
// and every turn goes through the hub (/v1/task/*), which calls the environment; verification
// replays every rollout, calling the environment again. Trainer steps happen, every replay
// passes, nobody is quarantined.
#include <chrono>
#include <fstream>
#include <thread>

#include "integration/cluster.h"

namespace stoa::integration {
namespace {

TEST(HttpTask, WorkersWithoutToolsTrainOnAPythonEnvironmentThroughTheHub) {
  if (!have_stoa_run()) GTEST_SKIP() << "this build has no `stoa run` (no libtorch)";
  const fs::path root = fs::temp_directory_path() / ("stoa_http_task_" + std::to_string(getpid()));
  fs::remove_all(root);
  fs::create_directories(root);
  const ArithmeticEnv environment(root);

  RunSpec spec;
  spec.bare_workers = true;
  spec.max_new_tokens = 16;
  spec.adjust = [&](run::RunConfig& c) {
    c.task = "http";
    c.task_options = env::TaskOptions{{"url", environment.url()}};
    c.data_dir = environment.data().string();
    c.hub.max_tokens = 1024;  // the arithmetic prompt is longer than the search one in this BPE
    c.hub.verify.enabled = true;
    c.hub.verify.fraction = 1.0;  // every rollout replayed: the environment is called again
    c.hub.verify.first_rollouts = 1'000'000;
  };
  Cluster cluster("http_task", spec);
  cluster.start_hub();
  cluster.start_worker("w1");
  cluster.start_worker("w2");
  const bool trained = wait_until(
      [&] { return cluster.step() >= 2 && cluster.counter("rollouts_verified") >= 4; }, 180s);
  EXPECT_TRUE(trained) << "steps " << cluster.step() << ", verified "
                       << cluster.counter("rollouts_verified") << "\n"
                       << cluster.logs();
  EXPECT_EQ(cluster.counter("verification_failures"), 0) << cluster.logs();
  EXPECT_EQ(cluster.counter("verification_environment_failures"), 0) << cluster.logs();
  EXPECT_EQ(cluster.counter("workers_quarantined"), 0) << cluster.logs();
  // The workers ran the task through the hub: they were given no task option and their turns
  // carry the environment's observations (or its correction of an invalid action).
  const LedgerView ledger = read_ledger(cluster.ledger_path());
  EXPECT_GE(ledger.rollout_group.size(), 4u);
  cluster.stop_all();
  fs::remove_all(root);
}

}  // namespace
}  // namespace stoa::integration
