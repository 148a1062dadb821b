// Issue 53: reinforcement learning with LoRA in a real run. `stoa run` with [trainer.lora] trains
// adapters on the frozen base, publishes every version as the merged W + scale·B·A, which an
// unchanged worker applies (patches from the first anchor) and the hub's replay of every rollout
// finds clean; the checkpoint holds the adapters only, and a restart resumes them on the run's
// base model.
#include <csignal>
#include <fstream>

#include "integration/cluster.h"

namespace stoa::integration {
namespace {

// The step log's lines (roles/trainer/step_log.h).
std::vector<nlohmann::json> step_records(const fs::path& path) {
  std::vector<nlohmann::json> out;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_object()) out.push_back(std::move(j));
  }
  return out;
}

TEST(LoraRun, AdaptersTrainPublishMergedVersionsAndResume) {
  if (!have_stoa_run()) GTEST_SKIP() << "`stoa run` is absent (a torch-OFF build): skipped";
  RunSpec spec;
  spec.adjust = [](run::RunConfig& rc) {
    rc.train.lora.rank = 4;
    rc.train.lora.alpha = 8;
    rc.train.lora.targets = {"q_proj", "v_proj", "w1"};
    rc.train.optimizer.lr = 0.01;  // adapters start at zero: a visible change within 3 steps
    rc.hub.verify.enabled = true;  // every rollout replayed on the merged view it came from
    rc.hub.verify.fraction = 1.0;
  };
  Cluster c("lora_run", spec);
  ASSERT_NE(read_text(c.dir() / "run.toml").find("[trainer.lora]"), std::string::npos);
  c.start_hub();
  c.start_worker("w1");
  ASSERT_TRUE(wait_until(
      [&] {
        const auto w = c.worker_status("w1");
        return c.step() >= 3 && w.is_object() && w["version"].is_number() &&
               w["version"].get<int64_t>() >= 2;
      },
      120s))
      << c.status().dump() << c.logs();

  // The checkpoint: adapters and their optimiser state, no copy of the model.
  const fs::path ckpt = c.run_dir() / "checkpoint";
  EXPECT_TRUE(fs::exists(ckpt / "adapters.safetensors")) << c.logs();
  EXPECT_FALSE(fs::exists(ckpt / "model")) << "a LoRA checkpoint holds no model";
  // Every version after the first changed the published int8 view: a patch with bytes in it.
  const auto steps = step_records(c.run_dir() / "steps.jsonl");
  ASSERT_GE(steps.size(), 3u);
  int64_t patched = 0;
  for (const auto& s : steps) patched += s.value("patch_bytes", int64_t{0}) > 0 ? 1 : 0;
  EXPECT_GT(patched, 0) << "no version changed the int8 view: the adapters did not train";

  // Stopped and started again: the adapters resume on the run's base (the checkpoint's hash of
  // it matches) and training goes on from the ledger's step.
  c.hub().signal(SIGTERM);
  ASSERT_EQ(c.hub().wait(60s), 0) << c.logs();
  const int64_t before = static_cast<int64_t>(step_records(c.run_dir() / "steps.jsonl").size());
  c.start_hub();
  EXPECT_TRUE(wait_until([&] { return c.step() >= before + 2; }, 120s))
      << c.status().dump() << c.logs();
  const std::string log = c.hub().err();
  EXPECT_NE(log.find("resumed from checkpoint"), std::string::npos) << log;
  EXPECT_NE(log.find("LoRA adapters of rank 4"), std::string::npos) << log;

  // The worker followed the merged versions across the restart, and no replay disagreed.
  const auto s = c.status();
  EXPECT_GT(s["counters"].value("rollouts_verified", 0.0), 0.0) << s.dump();
  EXPECT_EQ(s["counters"].value("verification_failures", -1.0), 0.0) << s.dump() << c.logs();
  EXPECT_EQ(s["counters"].value("workers_quarantined", -1.0), 0.0) << s.dump();
  for (const auto& [k, v] : s["counters"].items()) {
    if (k.rfind("rollouts_rejected_", 0) != 0) continue;
    const std::string reason = k.substr(18);
    if (reason != "stale" && reason != "group_full" && reason != "group_closed") {
      EXPECT_EQ(v.get<double>(), 0.0) << k << "\n" << s.dump();
    }
  }
  c.stop_all();
}

}  // namespace
}  // namespace stoa::integration
