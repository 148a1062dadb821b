// Peer checks with real processes (docs/design/verification.md, "Peer checks"): a real `stoa run`
// with [verify] peer and three real `stoa work` processes on different kernel targets, one of
// them a volunteer's bare worker (the task through the hub). Each worker's first rollouts go to
// the hub's own replay; every later rollout is replayed by another worker the hub picks before
// its group may train. Honest workers: every check passes, nobody is quarantined, no check is
// escalated as a disagreement, and the trainer trains on checked groups only; the canaries among
// the checks (a rollout the hub changed) all fail, as an exact replay must fail them.
#include <cstdio>

#include "integration/cluster.h"
#include "kernels/targets.h"

namespace stoa::integration {
namespace {

TEST(PeerChecks, HonestWorkersCheckEachOtherAcrossKernelTargets) {
  if (!have_stoa_run()) GTEST_SKIP() << "`stoa run` is absent (a torch-OFF build): skipped";
  const std::vector<int64_t> targets = kernels::available_targets();
  ASSERT_GE(targets.size(), 2u) << "every x86-64 CPU has at least two kernel targets";
  RunSpec spec;
  spec.adjust = [](run::RunConfig& rc) {
    rc.hub.verify.enabled = true;
    rc.hub.verify.peer = true;
    rc.hub.verify.first_rollouts = 2;
    rc.hub.verify.audit_fraction = 0.25;
    rc.hub.verify.canary_fraction = 0.3;  // a few canaries among the first checks
  };
  Cluster c("peer_checks", spec);
  c.start_hub();
  c.start_worker("w-best", "", {"--kernel-target", kernels::target_name(targets.front())});
  c.start_worker("w-last", "", {"--kernel-target", kernels::target_name(targets.back())});
  c.start_worker("w-third");

  constexpr double kChecks = 24;  // peer verdicts before the checks
  nlohmann::json s;
  const auto counter = [&](const char* name) { return s["counters"].value(name, 0.0); };
  const bool checked = wait_until(
      [&] {
        s = c.status();
        return s.contains("counters") &&
               counter("peer_checks_passed") + counter("peer_checks_failed") >= kChecks &&
               counter("canary_checks_caught") >= 2 && s.value("step", 0) >= 2;
      },
      180s);
  ASSERT_TRUE(checked) << s.dump() << "\n" << c.logs();
  std::printf(
      "peer checks: %.0f passed, %.0f failed, %.0f escalated (%.0f audits), %.0f trusted "
      "replays, %.0f rollouts accepted\n",
      counter("peer_checks_passed"), counter("peer_checks_failed"), counter("checks_escalated"),
      counter("checks_escalated_audit"), counter("rollouts_verified"),
      counter("rollouts_accepted"));
  EXPECT_EQ(counter("peer_checks_failed"), 0.0) << s.dump() << c.logs();
  EXPECT_EQ(counter("checks_escalated_disagreement"), 0.0) << s.dump();
  EXPECT_EQ(counter("verification_failures"), 0.0) << s.dump() << c.logs();
  EXPECT_EQ(counter("workers_quarantined"), 0.0) << s.dump() << c.logs();
  EXPECT_EQ(counter("checkers_quarantined"), 0.0) << s.dump();
  // Canaries (a rollout the hub passed, one log-prob nudged, blinded like every job): every
  // honest checker's replay fails them, the bare worker's through the hub's task proxy too.
  std::printf("canary checks: %.0f leased, %.0f failed by their checker (as they must)\n",
              counter("canary_checks_leased"), counter("canary_checks_caught"));
  EXPECT_EQ(counter("canary_checks_passed"), 0.0) << s.dump();
  EXPECT_EQ(counter("canary_checks_no_opinion"), 0.0) << s.dump() << c.logs();
  c.stop_all();
  // Every worker took checks: the hub spreads them (never the author's own).
  for (const char* w : {"w-best", "w-last", "w-third"})
    EXPECT_NE(c.worker(w).err().find("checks ("), std::string::npos) << w << ":\n"
                                                                     << c.worker(w).err();
}

}  // namespace
}  // namespace stoa::integration
