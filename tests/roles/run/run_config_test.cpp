// The TOML run config: defaults, every section read, paths resolved, and bad input refused with
// the file and key named.
#include <gtest/gtest.h>

#include "roles/run/minimal_run_config.h"
#include "roles/run/run_config.h"

namespace stoa::run {
namespace {

TEST(RunConfig, DefaultsAndPathsRelativeToTheFile) {
  auto c = parse_run_config(kMinimalRunToml, "run.toml", "/runs/a");
  EXPECT_EQ(c.model_dir, "/runs/a/model");
  EXPECT_EQ(c.data_dir, "/runs/a/data");
  EXPECT_EQ(c.task, "search");
  EXPECT_TRUE(c.task_options.empty()) << "a task's options are its own: the run adds none";
  EXPECT_EQ(c.hub.ledger_path, "/runs/a/run/ledger.sqlite");
  EXPECT_EQ(c.loop.checkpoint_dir, "/runs/a/run/checkpoint");
  EXPECT_EQ(c.loop.log_path, "/runs/a/run/steps.jsonl");
  EXPECT_EQ(c.train.loss.kind, train::LossKind::kDppoBinaryTv);
  EXPECT_EQ(c.hub.max_staleness, c.loop.staleness.max_staleness);
}

TEST(RunConfig, QueueDepthFollowsTheStalenessWindowUnlessSet) {
  // Complete groups age one version per groups_per_step while queued: the default queue holds
  // about half the staleness window, so queued groups are not dropped as stale.
  auto c = parse_run_config(std::string(kMinimalRunToml) +
                                "heartbeat_interval_s = 2\n[trainer]\n"
                                "groups_per_step = 3\nmax_staleness = 4\n",
                            "run.toml", "");
  EXPECT_EQ(c.hub.max_queued_groups, 6u);  // 3 x ceil(4 / 2)
  EXPECT_EQ(c.hub.heartbeat_interval_s, 2);
  auto z = parse_run_config(std::string(kMinimalRunToml) + "[trainer]\nmax_staleness = 0\n",
                            "run.toml", "");
  EXPECT_EQ(z.hub.max_queued_groups, z.loop.groups_per_step);
  // Skipping uniform groups, a step takes more than groups_per_step: twice the depth.
  auto skip = parse_run_config(std::string(kMinimalRunToml) +
                                   "[trainer]\ngroups_per_step = 3\nmax_staleness = 4\n"
                                   "skip_uniform_groups = true\n",
                               "run.toml", "");
  EXPECT_TRUE(skip.loop.skip_uniform_groups);
  EXPECT_EQ(skip.hub.max_queued_groups, 12u);
  auto set =
      parse_run_config(std::string(kMinimalRunToml) + "max_queued_groups = 50\n", "run.toml", "");
  EXPECT_EQ(set.hub.max_queued_groups, 50u);
  EXPECT_THROW(
      parse_run_config(std::string(kMinimalRunToml) + "heartbeat_interval_s = 0\n", "r.toml", ""),
      Error);
}

TEST(RunConfig, EverySectionIsRead) {
  auto c = parse_run_config(R"(
[run]
dir = "/abs/run"
model = "m"
data = "d"
task = "search"
max_steps = 7
[task]
index = "idx"
topk = 4
[hub]
port = 8123
join_token = "secret"
group_size = 8
lease_ttl_s = 30
max_open_groups = 5
[sampling]
temperature = 0.9
max_new_tokens = 128
max_turns = 3
[trainer]
lr = 2e-5
loss = "dppo-topk-kl"
delta_hi = 0.05
delta_lo = 0.05
groups_per_step = 6
min_groups = 2
gather_timeout_ms = 500
max_staleness = 2
checkpoint_every = 3
[pulse]
anchor_every = 5
keep_anchors = 2
)",
                            "x.toml", "/base");
  EXPECT_EQ(c.run_dir, "/abs/run");
  EXPECT_EQ(c.task_options.get("index"), "/base/idx") << "a path option, resolved";
  EXPECT_EQ(c.task_options.get("topk"), "4") << "a TOML integer, as the task's string";
  EXPECT_EQ(c.loop.max_steps, 7);
  EXPECT_EQ(c.server.port, 8123);
  EXPECT_EQ(c.hub.group_size, 8);
  EXPECT_EQ(c.hub.lease_ttl_ms, 30000);
  EXPECT_EQ(c.hub.max_open_groups, 5u);
  EXPECT_FLOAT_EQ(c.hub.sampling.temperature, 0.9f);
  EXPECT_FLOAT_EQ(static_cast<float>(c.train.temperature), 0.9f);  // π scored where μ was sampled
  EXPECT_EQ(c.hub.sampling.max_new_tokens, 128);
  EXPECT_EQ(c.hub.sampling.max_turns, 3);
  EXPECT_DOUBLE_EQ(c.train.optimizer.lr, 2e-5);
  EXPECT_EQ(c.train.loss.kind, train::LossKind::kDppoTopkKl);
  EXPECT_GT(c.hub.topk, 0) << "a top-K loss makes the hub ask workers for top-K";
  EXPECT_EQ(c.loop.groups_per_step, 6u);
  EXPECT_EQ(c.loop.min_groups, 2u);
  EXPECT_EQ(c.loop.gather_timeout.count(), 500);
  EXPECT_EQ(c.loop.staleness.max_staleness, 2u);
  EXPECT_EQ(c.hub.max_staleness, 2u);
  EXPECT_EQ(c.loop.checkpoint_every, 3);
  EXPECT_EQ(c.loop.publisher.anchor_every, 5u);
  EXPECT_EQ(c.loop.publisher.retention.keep_anchors, 2u);
}

void expect_error(const std::string& text, const std::string& needle) {
  try {
    parse_run_config(text, "bad.toml", "");
    FAIL() << "accepted: " << text;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("bad.toml"), std::string::npos) << e.what();
  }
}

TEST(RunConfig, BadInputIsRefusedNamingFileAndKey) {
  expect_error(std::string(kMinimalRunToml) + "[trainer]\nlearning_rate = 1\n", "learning_rate");
  expect_error(std::string(kMinimalRunToml) + "[trainr]\nlr = 1\n", "trainr");
  expect_error(std::string(kMinimalRunToml) + "[trainer]\nlr = \"fast\"\n", "lr");
  expect_error(std::string(kMinimalRunToml) + "[trainer]\nloss = \"nope\"\n", "nope");
  // A name the trainer does not know is refused with its section, whichever key names it.
  expect_error(std::string(kMinimalRunToml) + "[trainer]\nsharding = \"zero9\"\n", "[trainer] ");
  expect_error(std::string(kMinimalRunToml) + "[trainer]\ndtype = \"f16\"\n", "f16");
  expect_error(std::string(kMinimalRunToml) + "[trainer]\naggregation = 3\n", "aggregation");
  expect_error(std::string(kMinimalRunToml) + "[verify]\nmax_wait_s = 1.5\n", "max_wait_s");
  expect_error(std::string(kMinimalRunToml) + "[verify]\nbackend = \"cuda\"\n",
               "backend must be cpu, vulkan or auto");
  expect_error(std::string(kMinimalRunToml) + "fetches_per_blob = 0.5\n", "fetches_per_blob");
  expect_error(std::string(kMinimalRunToml) + "[trainer]\nlr = -1.0\n", "lr");
  expect_error(std::string(kMinimalRunToml) + "[trainer]\ngroups_per_step = -2\n",
               "groups_per_step");
  expect_error(std::string(kMinimalRunToml) + "[pulse]\nanchor_every = 0\n", "anchor_every");
  expect_error("[run]\ndata = \"d\"\n[hub]\njoin_token = \"t\"\n", "model");
  expect_error("[run]\nmodel = \"m\"\ndata = \"d\"\ntask = \"search\"\n", "join_token");
}

// [verify] backend: the hub's own replay on a GPU; cpu unless set, and it round-trips.
TEST(RunConfig, TheReplayBackendIsReadAndWritten) {
  EXPECT_EQ(parse_run_config(kMinimalRunToml, "run.toml", "/base").hub.verify.backend, "cpu");
  const RunConfig c = parse_run_config(
      std::string(kMinimalRunToml) + "[verify]\nbackend = \"vulkan\"\n", "run.toml", "/base");
  EXPECT_EQ(c.hub.verify.backend, "vulkan");
  const std::string written = to_toml(c);
  EXPECT_NE(written.find("backend = 'vulkan'"), std::string::npos) << written;
  EXPECT_EQ(parse_run_config(written, "run.toml", "/base").hub.verify.backend, "vulkan");
}

// [eval]: off unless every_steps is set; the question file is a path like the others; a pass@k
// the samples cannot give is refused when the run starts, not at its first evaluation.
TEST(RunConfig, HeldOutEvalIsReadAndChecked) {
  EXPECT_EQ(parse_run_config(kMinimalRunToml, "run.toml", "/b").eval.every_steps, 0);
  auto c = parse_run_config(std::string(kMinimalRunToml) +
                                "[eval]\nevery_steps = 10\nquestions = \"held_out.jsonl\"\n"
                                "limit = 40\npass_at = 4\ntemperature = 1.0\n",
                            "run.toml", "/b");
  EXPECT_EQ(c.eval.every_steps, 10);
  EXPECT_EQ(c.eval.questions, "/b/held_out.jsonl");
  EXPECT_EQ(c.eval.limit, 40);
  EXPECT_EQ(c.eval.pass_at, 4);
  EXPECT_EQ(c.eval.samples, 0) << "0: as many samples as pass_at needs";
  EXPECT_DOUBLE_EQ(c.eval.success_reward, 1.0);
  expect_error(std::string(kMinimalRunToml) + "[eval]\nevery_steps = 5\npass_at = 4\n",
               "temperature");
  expect_error(
      std::string(kMinimalRunToml) + "[eval]\npass_at = 4\nsamples = 2\ntemperature = 1.0\n",
      "[eval]");
  expect_error(std::string(kMinimalRunToml) + "[eval]\nevery = 5\n", "unknown key 'every'");
}

TEST(RunConfig, TheTaskIsNamedAndItsOptionsChecked) {
  const std::string no_task = "[run]\nmodel = \"m\"\ndata = \"d\"\n[hub]\njoin_token = \"t\"\n";
  // Absent or unknown: the error lists the tasks this build knows.
  expect_error(no_task, "known tasks: http, search");
  expect_error("[run]\nmodel = \"m\"\ndata = \"d\"\ntask = \"chess\"\n[hub]\njoin_token = \"t\"\n",
               "'chess' is not a known task (known tasks: http, search)");
  // An option the task does not accept: named, with the accepted ones.
  expect_error(std::string(kMinimalRunToml) + "[task]\nindx = \"i\"\n",
               "unknown option 'indx' (accepted: index, search_url, topk)");
  expect_error(std::string(kMinimalRunToml) + "[task]\nindex = [1, 2]\n", "[task] index");
  // The search index is the task's option now, not the run's.
  expect_error(
      "[run]\nmodel = \"m\"\ndata = \"d\"\ntask = \"search\"\nindex = \"i\"\n[hub]\n"
      "join_token = \"t\"\n",
      "unknown key 'index' in [run]");
  expect_error("[run\nmodel = 1", "invalid TOML");
}

}  // namespace
}  // namespace stoa::run
