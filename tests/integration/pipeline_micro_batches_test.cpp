// A pipeline group's head with several micro-batches in flight in a real run
// (docs/design/pipeline.md, "Micro-batches in a run"): `stoa run` replaying every rollout, and a
// group of three `stoa work --stage I/3` processes whose head cuts its 6 slots into 3
// micro-batches, each stepped by a thread of its own over the one link to stage 1. Its rollouts
// must replay clean on the hub's whole model across the trainer's weight versions (a switch
// waits until every micro-batch is at its safe point: none mixes versions), and the head's log
// must show more than one micro-batch down the chain at once.
#include <cstdio>
#include <regex>

#include "integration/cluster.h"

namespace stoa::integration {
namespace {

double worker_accepted(const nlohmann::json& status, const std::string& name) {
  for (const auto& w : status.value("workers", nlohmann::json::array()))
    if (w.value("name", "") == name) return w.value("rollouts_accepted", 0.0);
  return 0;
}

// The most micro-batches the head logged in flight at once (0 when it logged none).
int peak_in_flight(const std::string& log) {
  static const std::regex line("pipeline: ([0-9]+) micro-batches in flight at once");
  int peak = 0;
  for (auto it = std::sregex_iterator(log.begin(), log.end(), line); it != std::sregex_iterator();
       ++it)
    peak = std::max(peak, std::stoi((*it)[1].str()));
  return peak;
}

TEST(PipelineMicroBatches, AHeadWithSeveralInFlightReplaysClean) {
  if (!have_stoa_run()) GTEST_SKIP() << "`stoa run` is absent (a torch-OFF build): skipped";
  RunSpec spec;
  spec.adjust = [](run::RunConfig& rc) {
    rc.hub.verify.enabled = true;
    rc.hub.verify.peer = false;
    rc.hub.verify.fraction = 1.0;  // the hub replays every rollout
  };
  Cluster c("pipeline_micro_batches", spec);
  c.start_hub();
  const std::string stage1 = "127.0.0.1:" + std::to_string(free_port());
  const std::string stage2 = "127.0.0.1:" + std::to_string(free_port());
  c.start_worker("m-stage2", "", {"--stage", "2/3", "--stage-listen", stage2});
  c.start_worker("m-stage1", "",
                 {"--stage", "1/3", "--stage-listen", stage1, "--stage-next", stage2});
  c.start_worker(
      "m-head", "",
      {"--stage", "0/3", "--stage-next", stage1, "--slots", "6", "--micro-batches", "3"});

  nlohmann::json s;
  const auto counter = [&](const char* name) { return s["counters"].value(name, 0.0); };
  const bool trained = wait_until(
      [&] {
        s = c.status();
        return s.contains("counters") && s.value("step", 0) >= 3 &&
               worker_accepted(s, "m-head") >= 8;
      },
      120s);
  ASSERT_TRUE(trained) << s.dump() << "\n" << c.logs();
  const std::string head = c.worker("m-head").err();
  std::printf(
      "head: %.0f rollouts accepted; %.0f replayed, %.0f failed; %d micro-batches in "
      "flight at most\n",
      worker_accepted(s, "m-head"), counter("rollouts_verified"), counter("verification_failures"),
      peak_in_flight(head));
  EXPECT_NE(head.find("3 micro-batches in flight"), std::string::npos) << head;
  EXPECT_GE(peak_in_flight(head), 2) << head;
  EXPECT_GE(counter("rollouts_verified"), 8.0) << s.dump();
  EXPECT_EQ(counter("verification_failures"), 0.0) << s.dump() << c.logs();
  EXPECT_EQ(counter("workers_quarantined"), 0.0) << s.dump();
  // The micro-batches followed the trainer's versions, all switching at one safe point.
  EXPECT_GE(weight_switches(head).size(), 2u) << head;
  c.stop_all();
}

}  // namespace
}  // namespace stoa::integration
