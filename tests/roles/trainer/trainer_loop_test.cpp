// The trainer loop over a real Hub (SQLite ledger, leases, intake with recomputed rewards), a
// real blob store and PULSE publisher, and a tiny libtorch model. The restart tests tear the loop
// and the hub down and build new ones on the same files — what a restarted process does — with
// a "crash" placed in the window between the ledger's step mark and the checkpoint, and with
// groups handed to the trainer but never marked.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "model/presets.h"
#include "pulse/catalog.h"
#include "pulse/format.h"
#include "pulse/model_view.h"
#include "pulse/publisher.h"
#include "roles/hub/hub_fixture.h"
#include "roles/trainer/trainer_loop.h"

namespace stoa::trainer {
namespace {

class TrainerLoopTest : public hub::testing::HubFixture {
 protected:
  void SetUp() override {
    HubFixture::SetUp();
    config.max_open_groups = 64;
    config.max_staleness = 3;
    initial = random_weights(preset_config("tiny-qwen3"), 7);
    topts.threads = 1;
    topts.optimizer.lr = 1e-3;
    loop_opts.groups_per_step = 2;
    loop_opts.min_groups = 1;
    loop_opts.gather_timeout = std::chrono::milliseconds(50);
    loop_opts.poll = std::chrono::milliseconds(10);
    loop_opts.checkpoint_dir = (dir / "checkpoint").string();
    loop_opts.log_path = (dir / "steps.jsonl").string();
    loop_opts.publisher.anchor_every = 3;
  }
  void TearDown() override {
    loop.reset();
    HubFixture::TearDown();
  }
  TrainerLoop& open_loop() {
    loop.reset();
    loop = std::make_unique<TrainerLoop>(*hub, *store, initial, topts, loop_opts);
    loop->start();
    return *loop;
  }
  // Leases `n` groups and completes each with G rollouts at the hub's latest version (one right,
  // one wrong answer so the group has a non-zero advantage; with `uniform`, every answer wrong).
  // Returns the group ids.
  std::vector<std::string> fill_groups(int n, bool uniform = false) {
    const std::string w = join();
    const uint64_t v = *hub->latest_version();
    std::vector<std::string> ids;
    for (int i = 0; i < n; i++) {
      auto lease = hub->lease(w).lease;
      EXPECT_TRUE(lease.has_value());
      if (!lease) break;
      for (int s = 0; s < lease->samples; s++) {
        auto r = hub->submit(
            w, rollout(w, *lease,
                       s % 2 || uniform ? "<answer>nope</answer>" : right_answer(lease->prompt_id),
                       v));
        EXPECT_EQ(r.status, net::IntakeStatus::kAccepted) << r.reason << " " << r.detail;
      }
      ids.push_back(lease->group_id);
    }
    return ids;
  }
  // The fixture's gold answers (hub_fixture.h), in the episode's answer tags.
  static std::string right_answer(const std::string& prompt_id) {
    const std::map<std::string, std::string> gold = {
        {"q1", "migraine"}, {"q2", "Zentra"}, {"q3", "a drug"}};
    return "<answer>" + gold.at(prompt_id) + "</answer>";
  }
  std::map<std::string, hub::GroupRow> ledger_groups() {
    std::map<std::string, hub::GroupRow> out;
    hub::Ledger ledger(config.ledger_path);
    for (auto& g : ledger.groups()) out[g.id] = g;
    return out;
  }
  std::vector<nlohmann::json> log_lines() {
    std::vector<nlohmann::json> out;
    std::ifstream in(loop_opts.log_path);
    std::string line;
    while (std::getline(in, line)) out.push_back(nlohmann::json::parse(line));
    return out;
  }

  ModelWeights initial;
  train::TrainOptions topts;
  TrainerLoopOptions loop_opts;
  std::unique_ptr<TrainerLoop> loop;
};

TEST_F(TrainerLoopTest, StepsPublishVersionsAndLogEveryStep) {
  open_hub();
  auto& l = open_loop();
  EXPECT_FALSE(l.resumed());
  EXPECT_EQ(*hub->latest_version(), 0u);  // the initial weights, published before any step
  EXPECT_FALSE(l.step_once().has_value()) << "nothing ready: the loop must not block forever";

  auto ids = fill_groups(3);
  auto s1 = l.step_once();
  ASSERT_TRUE(s1.has_value());
  EXPECT_EQ(s1->step, 1);
  EXPECT_EQ(s1->version, 1u);
  EXPECT_EQ(s1->trained.size(), 2u);  // groups_per_step
  EXPECT_GT(s1->patch_bytes, 0u);
  auto s2 = l.step_once();
  ASSERT_TRUE(s2.has_value());
  EXPECT_EQ(s2->trained.size(), 1u);  // trains on what is there; never waits for more
  EXPECT_EQ(s2->version, 2u);
  EXPECT_EQ(*hub->latest_version(), 2u);
  EXPECT_EQ(hub->last_step(), 2);

  auto rows = ledger_groups();
  for (const auto& id : ids) EXPECT_EQ(rows.at(id).status, hub::GroupStatus::kTrained) << id;
  auto lines = log_lines();
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[1]["step"], 2);
  EXPECT_EQ(lines[1]["version"], 2);
  for (const char* key : {"loss", "masked_fraction", "tv_mean", "kl_mean", "reward_mean",
                          "patch_bytes", "staleness_histogram", "busy_fraction", "grad_norm"})
    EXPECT_TRUE(lines[0].contains(key)) << key;
  // The hub's recomputed reward: one right and one wrong answer per group.
  EXPECT_DOUBLE_EQ(lines[0]["reward_mean"].get<double>(), 0.5);
  // The published blobs are in the store and the catalog routes a cold start to version 2.
  auto catalog = pulse::Catalog::load((dir / "blobs" / "catalog.json").string());
  EXPECT_EQ(catalog.latest_version(), 2u);
  EXPECT_FALSE(catalog.plan(std::nullopt, 2).empty());
  // Version 0, made from the masters the trainer hands over one tensor at a time, is the int8
  // view of the initial weights, byte for byte.
  const auto anchor0 = catalog.newest_anchor(0);
  ASSERT_TRUE(anchor0.has_value());
  pulse::Int8Quantizer fresh;
  EXPECT_TRUE(store->get(anchor0->hash) ==
              pulse::encode_anchor(pulse::int8_view_of(initial, 0, &fresh)));
}

TEST_F(TrainerLoopTest, UniformGroupsAreClosedWithTheStepButNotRun) {
  loop_opts.skip_uniform_groups = true;
  open_hub();
  auto& l = open_loop();
  const auto uniform = fill_groups(1, /*uniform=*/true);
  const auto signal = fill_groups(2);
  auto s = l.step_once();
  ASSERT_TRUE(s.has_value());
  // Two groups with signal count towards groups_per_step; the all-wrong group rode along.
  EXPECT_EQ(s->trained.size(), 3u);
  EXPECT_EQ(s->uniform_groups, 1u);
  EXPECT_EQ(s->metrics.sequences, 2 * config.group_size);
  auto rows = ledger_groups();
  for (const auto& id : {uniform[0], signal[0], signal[1]})
    EXPECT_EQ(rows.at(id).status, hub::GroupStatus::kTrained) << id;
  auto lines = log_lines();
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0]["groups_uniform"], 1);
  EXPECT_EQ(lines[0]["groups"], 3);
  // The reward mean covers every closed rollout: 2 groups at 1/2 and one at 0.
  EXPECT_NEAR(lines[0]["reward_mean"].get<double>(), 1.0 / 3.0, 1e-9);

  // With nothing but uniform groups the loop still steps once the gather times out, running them
  // (a policy that earns the same reward everywhere must not stall the run).
  fill_groups(2, /*uniform=*/true);
  auto u = l.step_once();
  ASSERT_TRUE(u.has_value());
  EXPECT_EQ(u->trained.size(), 2u);
  EXPECT_EQ(u->uniform_groups, 0u);
  EXPECT_EQ(u->metrics.sequences, 2 * config.group_size);
}

TEST_F(TrainerLoopTest, StepsWithoutLearningSignalAreCountedAndWarnedOfUntilSignalReturns) {
  loop_opts.no_signal_warn_steps = 2;
  config.no_signal_warn_steps = 2;
  open_hub();
  auto& l = open_loop();
  for (int i = 0; i < 2; ++i) {
    fill_groups(1, /*uniform=*/true);  // every answer wrong: advantage 0, no gradient
    auto s = l.step_once();
    ASSERT_TRUE(s.has_value());
    EXPECT_EQ(s->report.groups_uniform, 1);
    EXPECT_EQ(s->metrics.grad_norm, 0.0);
  }
  EXPECT_TRUE(l.learning_signal().warning());
  EXPECT_EQ(l.learning_signal().streak(), 2);
  // The hub heard the same from the step reports: status and /metrics say so.
  auto signal = hub->status(0, 10)["learning_signal"];
  EXPECT_EQ(signal["steps_without_signal"], 2);
  EXPECT_EQ(signal["groups_uniform"], 2);
  EXPECT_TRUE(signal.contains("warning"));
  EXPECT_NE(hub->metrics().find("stoa_no_learning_signal 1\n"), std::string::npos);

  // One step with a reward spread ends the streak and the warning; the totals stay.
  fill_groups(1);
  auto s = l.step_once();
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->report.groups_uniform, 0);
  EXPECT_FALSE(l.learning_signal().warning());
  signal = hub->status(0, 10)["learning_signal"];
  EXPECT_EQ(signal["consecutive_steps_without_signal"], 0);
  EXPECT_EQ(signal["steps_without_signal"], 2);
  EXPECT_FALSE(signal.contains("warning"));
}

// [eval] (held_out_eval.h): the baseline on a fresh run's version 0, then after every second
// step, each on the int8 view just published (the state the hub announced for that version);
// the numbers reach the hub with every later step; a failing evaluation never stops the run.
TEST_F(TrainerLoopTest, HeldOutEvalRunsEveryNStepsOnThePublishedViewAndIsReported) {
  struct Call {
    int64_t step;
    uint64_t version;
    uint64_t view_version;
    Hash128 view_hash;
  };
  std::vector<Call> calls;
  loop_opts.max_steps = 4;
  loop_opts.eval.every_steps = 2;
  loop_opts.eval.evaluate = [&](int64_t step, uint64_t version, const pulse::Int8State& view) {
    calls.push_back({step, version, view.version(), view.state_hash()});
    if (step == 4) throw Error(ErrorKind::kNetwork, "the environment is down");
    HeldOutResult r;
    r.split = "held_out.jsonl";
    r.questions = 40;
    r.samples_per_question = 4;
    r.mean_reward = 0.25 + static_cast<double>(step);
    r.pass_at = {{1, 0.2}, {4, 0.45}};
    return r;
  };
  open_hub();
  auto& l = open_loop();
  fill_groups(8);  // 4 steps of groups_per_step = 2
  std::atomic<bool> stop{false};
  l.run(stop);
  EXPECT_EQ(l.last_step(), 4) << "the failed evaluation at step 4 did not end the run";
  ASSERT_EQ(calls.size(), 3u);
  const std::vector<std::pair<int64_t, uint64_t>> due = {{0, 0}, {2, 2}, {4, 4}};
  for (size_t i = 0; i < calls.size(); ++i) {
    EXPECT_EQ(calls[i].step, due[i].first);
    EXPECT_EQ(calls[i].version, due[i].second);
    EXPECT_EQ(calls[i].view_version, due[i].second) << "the view of the version just published";
  }
  // Version 0's view is the int8 view of the initial weights, as workers hold it.
  pulse::Int8Quantizer fresh;
  EXPECT_EQ(calls[0].view_hash, pulse::int8_view_of(initial, 0, &fresh).state_hash());
  // Step 4's report carries the evaluation after step 2 (step 4's own failed).
  const auto extra = hub->status(0, 10)["last_step"]["extra"];
  EXPECT_EQ(extra["eval_step"], 2);
  EXPECT_EQ(extra["eval_version"], 2);
  EXPECT_EQ(extra["eval_questions"], 40);
  EXPECT_DOUBLE_EQ(extra["eval_mean_reward"].get<double>(), 2.25);
  EXPECT_DOUBLE_EQ(extra["eval_pass_at_4"].get<double>(), 0.45);
  EXPECT_NE(hub->metrics().find("stoa_train_eval_pass_at_4 0.45"), std::string::npos);
}

TEST_F(TrainerLoopTest, StaleGroupsAreDroppedAndCounted) {
  loop_opts.staleness.max_staleness = 0;  // strictly on-policy trainer, lenient hub intake
  open_hub();
  auto& l = open_loop();
  fill_groups(1);
  ASSERT_TRUE(l.step_once().has_value());  // version 0 rollouts at version 0: fresh
  ASSERT_EQ(l.version(), 1u);
  // Rollouts sampled with version 0 but arriving after version 1 was published.
  const std::string w = join("late");
  auto lease = *hub->lease(w).lease;
  for (int s = 0; s < lease.samples; s++)
    ASSERT_EQ(hub->submit(w, rollout(w, lease, "<answer>x</answer>", 0)).status,
              net::IntakeStatus::kAccepted);
  EXPECT_FALSE(l.step_once().has_value());
  EXPECT_EQ(l.groups_dropped(), 1);
  EXPECT_EQ(ledger_groups().at(lease.group_id).status, hub::GroupStatus::kDropped);
  EXPECT_EQ(hub->counters()["groups_dropped_stale"], 1) << "the hub counts the dropped group";
  EXPECT_EQ(hub->last_step(), 1);
  // A dropped group is never handed out again.
  EXPECT_TRUE(hub->take_groups(10, std::chrono::milliseconds(1)).empty());
}

// A group the trainer cannot train on never ends the run: it is dropped in the ledger, counted,
// never handed out again, and the loop steps on. Here the hub took rollouts without top-K (its
// config says none) while the trainer's run asks for top-2: a run whose K changed across a
// restart, or a ledger written by an older hub.
TEST_F(TrainerLoopTest, GroupsBreakingTheRolloutRuleAreDroppedAndTheLoopStepsOn) {
  loop_opts.topk = 2;
  open_hub();
  auto& strict = open_loop();
  const auto refused = fill_groups(2);
  EXPECT_FALSE(strict.step_once().has_value());
  EXPECT_EQ(strict.groups_refused(), 2);
  EXPECT_EQ(strict.last_step(), 0);
  for (const auto& id : refused) {
    EXPECT_EQ(ledger_groups().at(id).status, hub::GroupStatus::kDropped);
    EXPECT_EQ(ledger_groups().at(id).drop_reason, "invalid_rollout");
  }
  EXPECT_EQ(hub->counters()["groups_dropped_invalid_rollout"], 2);
  EXPECT_TRUE(hub->take_groups(10, std::chrono::milliseconds(1)).empty());
  // The same run with the K its rollouts carry trains the next groups.
  loop_opts.topk = 0;
  auto& fixed = open_loop();
  const auto trained = fill_groups(2);
  auto step = fixed.step_once();
  ASSERT_TRUE(step.has_value());
  EXPECT_EQ(std::set<std::string>(step->trained.begin(), step->trained.end()),
            std::set<std::string>(trained.begin(), trained.end()));
}

// A batch the rule lets through but the trainer still refuses (here: a top-K loss given rollouts
// without top-K, a trainer started without the run's K) is dropped whole, and the loop goes on.
TEST_F(TrainerLoopTest, ABatchTheTrainerRefusesIsDroppedNotFatal) {
  topts.loss.kind = train::LossKind::kDppoTopkTv;
  open_hub();
  auto& l = open_loop();
  const auto refused = fill_groups(2);
  std::optional<LoopStep> step;
  EXPECT_NO_THROW(step = l.step_once());
  EXPECT_FALSE(step.has_value());
  EXPECT_EQ(l.groups_refused(), 2);
  for (const auto& id : refused) {
    EXPECT_EQ(ledger_groups().at(id).status, hub::GroupStatus::kDropped);
    EXPECT_EQ(ledger_groups().at(id).drop_reason, "trainer_refused");
  }
  EXPECT_EQ(hub->counters()["groups_dropped_trainer_refused"], 2);
  EXPECT_EQ(l.trainer().step_count(), 0);
  EXPECT_TRUE(hub->take_groups(10, std::chrono::milliseconds(1)).empty());
}

TEST_F(TrainerLoopTest, RestartResumesFromCheckpointAndTrainsNothingTwice) {
  loop_opts.checkpoint_every = 2;
  open_hub();
  std::multiset<std::string> trained;  // every group id every step trained on, both lives
  {
    auto& l = open_loop();
    fill_groups(6);
    for (int i = 0; i < 3; i++) {
      auto s = l.step_once();
      ASSERT_TRUE(s.has_value());
      trained.insert(s->trained.begin(), s->trained.end());
    }
    // Step 3 is marked in the ledger but not checkpointed (every 2): the crash window.
    ASSERT_EQ(hub->last_step(), 3);
    EXPECT_EQ(l.trainer().step_count(), 3);
  }
  // Two more complete groups: one handed to the trainer (pending) when the process dies, one
  // still waiting in the queue.
  auto extra = fill_groups(2);
  auto pending = hub->take_groups(1, std::chrono::milliseconds(1));
  ASSERT_EQ(pending.size(), 1u);
  const uint64_t version_before = *hub->latest_version();
  loop.reset();
  open_hub();  // the restarted process: a new Hub on the same ledger, a new loop
  auto& l2 = open_loop();
  EXPECT_TRUE(l2.resumed());
  EXPECT_EQ(l2.trainer().step_count(), 2) << "resumes from the step-2 checkpoint";
  EXPECT_EQ(l2.last_step(), 3) << "step numbering continues from the ledger";
  EXPECT_EQ(l2.version(), version_before + 1) << "the resumed weights are a new version";
  EXPECT_EQ(*hub->latest_version(), version_before + 1);

  for (int i = 0; i < 3; i++) {
    auto s = l2.step_once();
    if (!s) break;
    EXPECT_EQ(s->step, 4 + i);
    trained.insert(s->trained.begin(), s->trained.end());
  }
  // Every group of both lives trained exactly once: the pending one came back, none twice.
  std::set<std::string> unique(trained.begin(), trained.end());
  EXPECT_EQ(unique.size(), trained.size()) << "a group was trained on twice";
  EXPECT_EQ(trained.size(), 8u);
  EXPECT_TRUE(unique.count(pending[0].group_id));
  for (const auto& id : extra) EXPECT_TRUE(unique.count(id)) << id;
  for (const auto& [id, row] : ledger_groups()) {
    if (row.status == hub::GroupStatus::kComplete || row.status == hub::GroupStatus::kOpen)
      ADD_FAILURE() << "group " << id << " left untrained";
  }
  EXPECT_EQ(hub->last_step(), l2.last_step());
  EXPECT_EQ(l2.trainer().step_count(), 2 + (l2.last_step() - 3));
}

// A kill after the publisher saved its blobs and catalog but before the ledger recorded the
// version leaves the catalog one version ahead of the ledger. The restarted loop publishes above
// both, and as a patch from the newest published view (rebuilt from the store), not an anchor:
// a worker that held any of these versions follows with patches.
TEST_F(TrainerLoopTest, ARestartPublishesAboveTheCatalogAsAPatchFromThePublishedView) {
  loop_opts.publisher.anchor_every = 50;  // only version 0 is due an anchor
  open_hub();
  {
    auto& l = open_loop();
    fill_groups(2);
    ASSERT_TRUE(l.step_once().has_value());
  }
  loop.reset();
  const uint64_t ledger_latest = *hub->latest_version();
  {
    // The publish the kill interrupted: in the store and its catalog, never in the ledger.
    pulse::Publisher interrupted(*store, loop_opts.publisher);
    const pulse::Published p =
        interrupted.publish(ledger_latest + 1, pulse::config_hash(initial.config),
                            [this](const pulse::MasterSink& take) {
                              for (const auto& [name, t] : initial.tensors)
                                take(name, t.shape(), t.as<const float>());
                            });
    ASSERT_EQ(p.rebuilt_from, ledger_latest);
  }
  open_hub();
  auto& l2 = open_loop();
  EXPECT_EQ(l2.version(), ledger_latest + 2)
      << "above the catalog's version, not only the ledger's";
  const auto catalog = pulse::Catalog::load((dir / "blobs" / "catalog.json").string());
  EXPECT_EQ(catalog.latest_version(), ledger_latest + 2);
  for (const auto& e : catalog.plan(ledger_latest, ledger_latest + 2))
    EXPECT_EQ(e.kind, pulse::BlobKind::kPatch) << e.from_version << "->" << e.to_version;
  EXPECT_EQ(catalog.newest_anchor(ledger_latest + 2)->to_version, 0u) << "the restart is no anchor";
}

// A kill -9 while save_checkpoint was writing <dir>.tmp/trainer.json leaves it torn beside the
// intact <dir>: the restart resumes from <dir>, not from the torn one (found by
// test_integration_hostile_rollout's kill -9 landing inside a checkpoint).
TEST_F(TrainerLoopTest, ResumeSkipsACheckpointWhoseTrainerJsonIsTorn) {
  open_hub();
  {
    auto& l = open_loop();
    fill_groups(1);
    ASSERT_TRUE(l.step_once().has_value());
  }
  loop.reset();
  std::filesystem::create_directories(dir / "checkpoint.tmp");
  std::ofstream(dir / "checkpoint.tmp" / "trainer.json") << "{\"step\": 2, \"fo";
  open_hub();
  auto& l2 = open_loop();
  EXPECT_TRUE(l2.resumed());
  EXPECT_EQ(l2.trainer().step_count(), 1);
}

TEST_F(TrainerLoopTest, ResumeSurvivesACrashInsideCheckpointReplacement) {
  open_hub();
  {
    auto& l = open_loop();
    fill_groups(1);
    ASSERT_TRUE(l.step_once().has_value());
  }
  loop.reset();
  // save_checkpoint removes <dir> and renames <dir>.tmp; a kill between the two leaves only tmp.
  std::filesystem::rename(dir / "checkpoint", dir / "checkpoint.tmp");
  open_hub();
  auto& l2 = open_loop();
  EXPECT_TRUE(l2.resumed());
  EXPECT_EQ(l2.trainer().step_count(), 1);
}

TEST_F(TrainerLoopTest, BadOptionsAreRefused) {
  open_hub();
  loop_opts.checkpoint_every = 0;
  EXPECT_THROW(TrainerLoop(*hub, *store, initial, topts, loop_opts), Error);
  loop_opts.checkpoint_every = 1;
  loop_opts.min_groups = 3;
  loop_opts.groups_per_step = 2;
  EXPECT_THROW(TrainerLoop(*hub, *store, initial, topts, loop_opts), Error);
}

}  // namespace
}  // namespace stoa::trainer
