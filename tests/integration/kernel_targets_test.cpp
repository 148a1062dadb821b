// Honest workers on different kernel targets (issue 19): two real `stoa work` processes, one
// forced onto this CPU's best SIMD target and one onto its last (`--kernel-target`), against a
// real `stoa run` whose validator (on the best target) replays every rollout. Logits and the
// sampler are bit-identical across targets, so every verdict passes; the hub counts them by the
// target each rollout recorded, in /v1/status and /metrics.
#include <cstdio>

#include "integration/cluster.h"
#include "kernels/targets.h"

namespace stoa::integration {
namespace {

TEST(KernelTargets, WorkersOnTwoTargetsPassEveryReplayAndAreCountedByTarget) {
  if (!have_stoa_run()) GTEST_SKIP() << "`stoa run` is absent (a torch-OFF build): skipped";
  const std::vector<int64_t> targets = kernels::available_targets();
  ASSERT_GE(targets.size(), 2u) << "every x86-64 CPU has at least two kernel targets";
  const std::string best = kernels::target_name(targets.front());
  const std::string last = kernels::target_name(targets.back());
  RunSpec spec;
  spec.adjust = [](run::RunConfig& rc) {
    rc.hub.verify.enabled = true;
    rc.hub.verify.fraction = 1.0;
  };
  Cluster c("kernel_targets", spec);
  c.start_hub();
  c.start_worker("w-best", "", {"--kernel-target", best});
  c.start_worker("w-last", "", {"--kernel-target", last});

  const auto verified = [&](const nlohmann::json& s, const std::string& target, const char* r) {
    if (!s.contains("verification") || !s["verification"]["by_target"].contains(target)) return 0.0;
    return s["verification"]["by_target"][target].value(r, 0.0);
  };
  constexpr double kEach = 6;  // replayed rollouts per target before the checks
  nlohmann::json s;
  const bool replayed = wait_until(
      [&] {
        s = c.status();
        return verified(s, best, "pass") + verified(s, best, "fail") >= kEach &&
               verified(s, last, "pass") + verified(s, last, "fail") >= kEach;
      },
      120s);
  ASSERT_TRUE(replayed) << s.dump() << "\n" << c.logs();
  std::printf("replay by kernel target: %s\n", s["verification"]["by_target"].dump().c_str());
  // Honest workers: every replay passed on either target, nobody quarantined, and every verdict
  // is counted under the target its rollout named.
  EXPECT_EQ(verified(s, best, "fail"), 0.0) << s.dump() << c.logs();
  EXPECT_EQ(verified(s, last, "fail"), 0.0) << s.dump() << c.logs();
  EXPECT_EQ(s["counters"].value("verification_failures", -1.0), 0.0) << s.dump();
  EXPECT_EQ(s["counters"].value("workers_quarantined", -1.0), 0.0) << s.dump();
  double by_target = 0;
  for (const auto& [t, n] : s["verification"]["by_target"].items())
    by_target += n.value("pass", 0.0) + n.value("fail", 0.0);
  EXPECT_EQ(by_target, s["counters"].value("rollouts_verified", -1.0)) << s.dump();
  EXPECT_EQ(s["verification"]["by_target"].size(), 2u) << s.dump();

  const std::string m = c.metrics();
  for (const std::string& t : {best, last})
    EXPECT_NE(
        m.find("stoa_rollouts_verified_by_target_total{target=\"" + t + "\",result=\"pass\"} "),
        std::string::npos)
        << m;
  EXPECT_NE(m.find("stoa_rollouts_verified_total{result=\"pass\"} "), std::string::npos) << m;

  c.stop_all();
  EXPECT_NE(c.worker("w-best").out().find("Kernel target: " + best + " (forced"), std::string::npos)
      << c.worker("w-best").out();
  EXPECT_NE(c.worker("w-last").out().find("Kernel target: " + last + " (forced"), std::string::npos)
      << c.worker("w-last").out();
}

}  // namespace
}  // namespace stoa::integration
