// A GPU worker in a fleet (issue 54): a real `stoa run` whose hub replays every rollout on the
// CPU engine ([verify] fraction = 1.0), one `stoa work --backend vulkan` (on this machine's
// Vulkan device: Mesa's lavapipe in CI) beside two CPU workers forced onto this CPU's best and
// last kernel targets. The Vulkan backend computes engine arithmetic v2 bit for bit, so every
// replay passes whatever computed the rollout, and the run trains on all three.
#include <cstdio>

#include "gpu/vulkan/context.h"
#include "integration/cluster.h"
#include "kernels/targets.h"

namespace stoa::integration {
namespace {

TEST(VulkanWorker, AVulkanWorkerBesideCpuWorkersPassesEveryReplayAndTheRunTrains) {
  if (!have_stoa_run()) GTEST_SKIP() << "`stoa run` is absent (a torch-OFF build): skipped";
  std::string why;
  if (!gpu::vulkan::Context::create(&why)) GTEST_SKIP() << "no Vulkan device: " << why;
  const std::vector<int64_t> targets = kernels::available_targets();
  ASSERT_GE(targets.size(), 2u);
  const std::string best = kernels::target_name(targets.front());
  const std::string last = kernels::target_name(targets.back());
  RunSpec spec;
  spec.adjust = [](run::RunConfig& rc) {
    rc.hub.verify.enabled = true;
    rc.hub.verify.fraction = 1.0;
  };
  Cluster c("vulkan_worker", spec);
  c.start_hub();
  c.start_worker("w-gpu", "", {"--backend", "vulkan"});
  c.start_worker("w-best", "", {"--kernel-target", best});
  c.start_worker("w-last", "", {"--kernel-target", last});

  const auto verified = [&](const nlohmann::json& s, const std::string& target, const char* r) {
    if (!s.contains("verification") || !s["verification"]["by_target"].contains(target)) return 0.0;
    return s["verification"]["by_target"][target].value(r, 0.0);
  };
  constexpr double kEach = 8;  // replayed rollouts per kind of worker before the checks
  nlohmann::json s;
  const bool replayed = wait_until(
      [&] {
        s = c.status();
        for (const std::string& t : {std::string("vulkan"), best, last})
          if (verified(s, t, "pass") + verified(s, t, "fail") < kEach) return false;
        return s.value("step", int64_t{0}) >= 1;
      },
      200s);
  ASSERT_TRUE(replayed) << s.dump() << "\n" << c.logs();
  std::printf("replay by what computed the rollout: %s; step %lld\n",
              s["verification"]["by_target"].dump().c_str(),
              static_cast<long long>(s.value("step", int64_t{0})));
  for (const std::string& t : {std::string("vulkan"), best, last})
    EXPECT_EQ(verified(s, t, "fail"), 0.0) << t << ": " << s.dump() << c.logs();
  EXPECT_EQ(s["counters"].value("verification_failures", -1.0), 0.0) << s.dump();
  EXPECT_EQ(s["counters"].value("workers_quarantined", -1.0), 0.0) << s.dump();

  c.stop_all();
  EXPECT_NE(c.worker("w-gpu").out().find("(Vulkan; "), std::string::npos)
      << c.worker("w-gpu").out();
}

}  // namespace
}  // namespace stoa::integration
