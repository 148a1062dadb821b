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
  Cluster c("pipeline_micro_batches", every_rollout_replayed_by_hub());
  c.start_hub();
  start_three_stage_group(c, "m", {"--slots", "6", "--micro-batches", "3"});

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
