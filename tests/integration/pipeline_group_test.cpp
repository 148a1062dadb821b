// A pipeline group in a real run (docs/design/pipeline.md, "Pipeline groups"): `stoa run` with
// the hub replaying every rollout, one whole-model `stoa work`, and a group of three `stoa work
// --stage I/3` processes, each holding and syncing only its span of tiny-lfm2's five layers.
// The group's head leases and submits like any worker; its rollouts must replay clean on the
// hub's whole model, across the weight versions the trainer publishes while they run. Then the
// group's last stage is killed mid-run and started again: the head gives its rollouts in
// progress back, reconnects, and the group's rollouts keep replaying clean.
//
// Then the same formed by the hub: two `stoa work --max-memory --stage-relay` workers, each
// allowed less than the whole model but more than half of it and reachable by nobody, are
// grouped by the hub into a 2-stage group linked through the hub's stage relay; one of them is
// killed, the hub dissolves the group, and when it comes back the two are grouped again.
#include <cstdio>
#include <string>
#include <vector>

#include "integration/cluster.h"
#include "model/config.h"
#include "model/layer_span.h"
#include "model/memory_need.h"

namespace stoa::integration {
namespace {

TEST(PipelineGroup, TrainsBesideAWholeWorkerAndEveryRolloutReplaysClean) {
  if (!have_stoa_run()) GTEST_SKIP() << "`stoa run` is absent (a torch-OFF build): skipped";
  Cluster c("pipeline_group", every_rollout_replayed_by_hub());
  c.start_hub();
  const ThreeStageGroup group = start_three_stage_group(c, "g");
  c.start_worker("whole");

  nlohmann::json s;
  const auto counter = [&](const char* name) { return s["counters"].value(name, 0.0); };
  const bool trained = wait_until(
      [&] {
        s = c.status();
        return s.contains("counters") && s.value("step", 0) >= 3 &&
               worker_accepted(s, "g-head") >= 6 && worker_accepted(s, "whole") >= 2;
      },
      240s);
  ASSERT_TRUE(trained) << s.dump() << "\n"
                       << c.logs() << "\n---- the stages' first lines ----\n"
                       << c.worker("g-stage1").err().substr(0, 4000) << "\n"
                       << c.worker("g-stage2").err().substr(0, 4000);
  std::printf("group: %.0f rollouts accepted, whole worker %.0f; %.0f replayed, %.0f failed\n",
              worker_accepted(s, "g-head"), worker_accepted(s, "whole"),
              counter("rollouts_verified"), counter("verification_failures"));
  EXPECT_EQ(counter("verification_failures"), 0.0) << s.dump() << c.logs();
  EXPECT_EQ(counter("workers_quarantined"), 0.0) << s.dump();
  // The group followed the trainer's versions (each switch named down the pipeline).
  EXPECT_GE(weight_switches(c.worker("g-head").err()).size(), 2u) << c.worker("g-head").err();

  // The last stage dies mid-run: the head notices at its next pass and gives its rollouts in
  // progress back. The stage comes back on its address; the group reconnects and trains on.
  const size_t head_log = c.worker("g-head").err().size();
  c.kill_worker("g-stage2");
  const auto head_since = [&] { return c.worker("g-head").err().substr(head_log); };
  ASSERT_TRUE(wait_until(
      [&] { return head_since().find("the pipeline group broke") != std::string::npos; }, 120s))
      << head_since();
  c.start_worker("g-stage2", "", {"--stage", "2/3", "--stage-listen", group.stage2});
  ASSERT_TRUE(wait_until(
      [&] { return c.worker("g-stage2").err().find(" serves layers") != std::string::npos; }, 120s))
      << c.worker("g-stage2").err();
  s = c.status();
  const double before = worker_accepted(s, "g-head");
  const bool recovered = wait_until(
      [&] {
        s = c.status();
        return worker_accepted(s, "g-head") >= before + 4;
      },
      240s);
  ASSERT_TRUE(recovered) << s.dump() << "\n" << c.logs();
  const std::string after = head_since();
  const size_t broke = after.find("the pipeline group broke");
  std::printf("head: ...%s\n", after.substr(broke, after.find('\n', broke) - broke).c_str());
  EXPECT_NE(after.find("heading a pipeline group", after.find("the pipeline group broke")),
            std::string::npos)
      << after;
  EXPECT_EQ(counter("verification_failures"), 0.0) << s.dump() << c.logs();
  EXPECT_EQ(counter("workers_quarantined"), 0.0) << s.dump();
  c.stop_all();
}

// The ids of the pipeline groups `worker` was placed in, in order (the hub's ids start at a
// random value: a restarted hub never reuses an old group's).
std::vector<std::string> groups_placed(Cluster& c, const std::string& worker) {
  const std::string log = c.worker(worker).err();
  const std::string mark = "placed in pipeline group ";
  std::vector<std::string> ids;
  for (size_t at = log.find(mark); at != std::string::npos; at = log.find(mark, at + 1)) {
    const size_t from = at + mark.size();
    ids.push_back(log.substr(from, log.find(':', from) - from));
  }
  return ids;
}

bool log_has(Cluster& c, const std::string& worker, const std::string& words) {
  return c.worker(worker).err().find(words) != std::string::npos;
}

TEST(PipelineGroup, TheHubGroupsWorkersTooSmallForTheModel) {
  if (!have_stoa_run()) GTEST_SKIP() << "`stoa run` is absent (a torch-OFF build): skipped";
  RunSpec spec;
  spec.adjust = [](run::RunConfig& rc) {
    rc.hub.verify.enabled = true;
    rc.hub.verify.peer = false;
    rc.hub.verify.fraction = 1.0;
  };
  Cluster c("pipeline_hub_groups", spec);
  c.start_hub();
  // A cap between what half the model needs and what the whole needs.
  const ModelConfig config = load_model_config((assets().model / "config.json").string());
  const uint64_t whole = memory_needed(config).total();
  uint64_t half = 0;
  for (const LayerSpan& span : split_layers(config, 2))
    half = std::max(half, memory_needed(config, span).total());
  ASSERT_LT(half, whole);
  char cap[64];
  std::snprintf(cap, sizeof cap, "%.6f", static_cast<double>(half + (whole - half) / 2) / 1e6);
  // Both behind NAT as far as the hub knows: the hop between them goes through the hub's relay.
  const std::vector<std::string> small = {"--max-memory", cap, "--stage-relay"};
  for (const char* w : {"small-a", "small-b"}) c.start_worker(w, "", small);
  c.start_worker("whole");

  nlohmann::json s;
  const auto counter = [&](const char* name) { return s["counters"].value(name, 0.0); };
  const auto group_accepted = [&] {
    return worker_accepted(s, "small-a") + worker_accepted(s, "small-b");
  };
  ASSERT_TRUE(wait_until(
      [&] {
        s = c.status();
        return s.contains("counters") && s.value("step", 0) >= 3 && group_accepted() >= 6 &&
               worker_accepted(s, "whole") >= 2;
      },
      240s))
      << s.dump() << "\n"
      << c.logs();
  const std::vector<std::string> first_a = groups_placed(c, "small-a");
  const std::vector<std::string> first_b = groups_placed(c, "small-b");
  ASSERT_EQ(first_a.size(), 1u) << c.worker("small-a").err();
  ASSERT_EQ(first_b, first_a) << c.worker("small-b").err();
  EXPECT_TRUE(log_has(c, "small-a", "served through the hub's relay") !=
              log_has(c, "small-b", "served through the hub's relay"))
      << "the stage after the head (and only it) is served through the relay";
  std::printf("hub-formed group: %.0f rollouts accepted, whole worker %.0f; %.0f failed\n",
              group_accepted(), worker_accepted(s, "whole"), counter("verification_failures"));
  EXPECT_EQ(counter("verification_failures"), 0.0) << s.dump() << c.logs();

  // small-b dies: the hub dissolves the group, small-a asks again; small-b comes back (the same
  // identity) and the two are grouped anew.
  c.kill_worker("small-b");
  ASSERT_TRUE(wait_until([&] { return log_has(c, "small-a", "ended: asking again"); }, 120s))
      << c.worker("small-a").err();
  c.start_worker("small-b", "", small);
  ASSERT_TRUE(wait_until(
      [&] {
        const std::vector<std::string> a = groups_placed(c, "small-a");
        const std::vector<std::string> b = groups_placed(c, "small-b");
        return a.size() == 2 && b.size() == 2 && a.back() == b.back() && a.back() != a.front();
      },
      120s))
      << c.worker("small-a").err() << c.worker("small-b").err();
  s = c.status();
  const double before = group_accepted();
  ASSERT_TRUE(wait_until(
      [&] {
        s = c.status();
        return group_accepted() >= before + 4;
      },
      240s))
      << s.dump() << "\n"
      << c.logs();
  EXPECT_EQ(counter("verification_failures"), 0.0) << s.dump() << c.logs();
  EXPECT_EQ(counter("workers_quarantined"), 0.0) << s.dump();
  // The operator's view: two groups formed, the first dissolved.
  EXPECT_GE(s["pipeline_groups"].value("formed", 0), 2) << s.dump();
  EXPECT_GE(s["pipeline_groups"].value("dissolved", 0), 1) << s.dump();
  c.stop_all();
}

}  // namespace
}  // namespace stoa::integration
