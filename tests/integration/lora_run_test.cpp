// Issue 53: reinforcement learning with LoRA in a real run. `stoa run` with [trainer.lora] trains
// adapters on the frozen base and publishes every version as the merged W + scale·B·A, which an
// unchanged worker applies (patches from the first anchor) and the hub's replay of every rollout
// finds clean; the checkpoint holds the adapters only, and a restart resumes them on the run's
// base model. Beside it, the patch share per version with LoRA and with full fine-tuning at the
// same learning rate. The task is the arithmetic reference environment with a graded reward
// (spread_reward_env.py): the tiny model earns a different reward in every group, so every step
// moves the weights.
#include <csignal>
#include <cstdio>
#include <fstream>
#include <map>
#include <set>

#include "core/process.h"
#include "integration/cluster.h"
#include "model/config.h"
#include "pulse/patch_share.h"
#include "support/source_dir.h"
#include "train/lora.h"

namespace stoa::integration {
namespace {

// tests/integration/spread_reward_env.py: its data made in <dir>/data, then served on a free port;
// killed with the object.
class SpreadRewardEnv {
 public:
  explicit SpreadRewardEnv(const fs::path& dir) : dir_(dir) {
    fs::remove_all(dir);
    fs::create_directories(dir);
    if (start({"data", "--out", (dir / "data").string(), "--train", "64", "--val", "8"}, "data")
            .wait() != 0)
      throw std::runtime_error("spread_reward_env.py data failed:\n" + read_text(dir / "data.log"));
    const fs::path port_file = dir / "env.port";
    server_ = std::make_unique<stoa::Process>(
        start({"serve", "--port", "0", "--port-file", port_file.string()}, "env"));
    if (!wait_until([&] { return fs::exists(port_file); }, 20s))
      throw std::runtime_error("spread_reward_env.py did not start:\n" +
                               read_text(dir / "env.log"));
    std::ifstream(port_file) >> port_;
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  fs::path data() const { return dir_ / "data"; }

 private:
  stoa::Process start(const std::vector<std::string>& args, const std::string& log) const {
    const std::string python = find_executable("python3");
    if (python.empty()) throw std::runtime_error("python3 is needed (scripts/setup installs it)");
    std::vector<std::string> argv = {
        python, (test::source_dir() / "tests/integration/spread_reward_env.py").string()};
    argv.insert(argv.end(), args.begin(), args.end());
    ProcessOptions o = logged_to((dir_ / (log + ".log")).string(), true);
    o.die_with_parent = true;
    return stoa::Process::start(argv, o);
  }
  fs::path dir_;
  std::unique_ptr<stoa::Process> server_;
  int port_ = 0;
};

// A run on the environment, tools through the hub, every rollout replayed.
RunSpec spread_reward_run(const SpreadRewardEnv& env,
                          const std::function<void(run::RunConfig&)>& adjust) {
  RunSpec spec;
  spec.bare_workers = true;
  spec.max_new_tokens = 16;
  spec.adjust = [&env, adjust](run::RunConfig& rc) {
    rc.task = "http";
    rc.task_options = env::TaskOptions{{"url", env.url()}};
    rc.data_dir = env.data().string();
    rc.hub.max_tokens = 1024;  // the arithmetic prompt is longer than the search one
    rc.hub.verify.enabled = true;
    rc.hub.verify.fraction = 1.0;
    rc.hub.verify.first_rollouts = 1'000'000;
    adjust(rc);
  };
  return spec;
}

using pulse::PatchShares;

PatchShares patch_shares(const fs::path& run_dir) {
  return pulse::patch_shares((run_dir / "blobs").string());
}

// The step log's gradient norm of each step, by the version published after it.
std::map<uint64_t, double> grad_norms(const fs::path& run_dir) {
  std::map<uint64_t, double> out;
  std::ifstream in(run_dir / "steps.jsonl");
  for (std::string line; std::getline(in, line);) {
    const auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_object()) out[j.value("version", uint64_t{0})] = j.value("grad_norm", 0.0);
  }
  return out;
}

// A version after a step with a gradient changed the int8 view (a step without one — every
// group's reward the same — may still move the weights by AdamW's momentum, or not).
void expect_versions_follow_the_gradient(const PatchShares& shares,
                                         const std::map<uint64_t, double>& norms) {
  for (const auto& [version, norm] : norms) {
    ASSERT_TRUE(shares.int8_share.count(version)) << "no patch to version " << version;
    if (norm > 0) {
      EXPECT_GT(shares.int8_share.at(version), 0) << "version " << version;
    }
  }
}

double mean_share(const PatchShares& shares, const std::map<uint64_t, double>& norms) {
  double sum = 0;
  int n = 0;
  for (const auto& [version, norm] : norms) {
    if (norm > 0 && shares.int8_share.count(version)) {
      sum += shares.int8_share.at(version);
      ++n;
    }
  }
  return n ? sum / n : 0;
}

// Whether the hub's counters show every rollout replayed clean and nothing turned away but for
// the documented lateness reasons.
void expect_clean_replays(const nlohmann::json& s, const std::string& logs) {
  EXPECT_GT(s["counters"].value("rollouts_verified", 0.0), 0.0) << s.dump();
  EXPECT_EQ(s["counters"].value("verification_failures", -1.0), 0.0) << s.dump() << logs;
  EXPECT_EQ(s["counters"].value("workers_quarantined", -1.0), 0.0) << s.dump();
  for (const auto& [k, v] : s["counters"].items()) {
    if (k.rfind("rollouts_rejected_", 0) != 0) continue;
    const std::string reason = k.substr(18);
    if (reason != "stale" && reason != "group_full" && reason != "group_closed") {
      EXPECT_EQ(v.get<double>(), 0.0) << k << "\n" << s.dump();
    }
  }
}

TEST(LoraRun, AdaptersTrainPublishMergedVersionsAndResume) {
  if (!have_stoa_run()) GTEST_SKIP() << "`stoa run` is absent (a torch-OFF build): skipped";
  const SpreadRewardEnv env(fs::temp_directory_path() /
                            ("stoa_lora_run_env_" + std::to_string(::getpid())));
  Cluster c("lora_run", spread_reward_run(env, [](run::RunConfig& rc) {
              rc.train.lora.rank = 4;
              rc.train.lora.alpha = 8;
              rc.train.lora.targets = {"q_proj", "v_proj", "w1"};
              rc.loop.publisher.anchor_every = 1000;  // patches only after version 0, all kept
            }));
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
  expect_clean_replays(c.status(), c.logs());

  // The checkpoint: adapters and their optimiser state, no copy of the model.
  const fs::path ckpt = c.run_dir() / "checkpoint";
  EXPECT_TRUE(fs::exists(ckpt / "adapters.safetensors")) << c.logs();
  EXPECT_FALSE(fs::exists(ckpt / "model")) << "a LoRA checkpoint holds no model";

  // Stopped and started again: the adapters resume on the run's base (the checkpoint's hash of
  // it matches) and training goes on from the ledger's step; the worker follows across. The
  // operator edited [trainer.lora]'s alpha meanwhile: the checkpoint's settings are kept, and
  // the log says so.
  c.hub().signal(SIGTERM);
  ASSERT_EQ(c.hub().wait(60s), 0) << c.logs();
  {
    const fs::path toml = c.dir() / "run.toml";
    std::string text = read_text(toml);
    const size_t section = text.find("[trainer.lora]");
    const size_t alpha = text.find("\nalpha", section);
    ASSERT_NE(alpha, std::string::npos) << text;
    text.replace(alpha, text.find('\n', alpha + 1) - alpha, "\nalpha = 3.0");
    std::ofstream(toml) << text;
  }
  const int64_t stopped_at = read_ledger(c.ledger_path()).steps;
  c.start_hub();
  EXPECT_TRUE(wait_until([&] { return c.step() >= stopped_at + 2; }, 120s))
      << c.status().dump() << c.logs();
  const std::string log = c.hub().err();
  EXPECT_NE(log.find("resumed from checkpoint"), std::string::npos) << log;
  EXPECT_NE(log.find("LoRA adapters of rank 4"), std::string::npos) << log;
  EXPECT_NE(log.find("the run goes on with the checkpoint's"), std::string::npos) << log;
  expect_clean_replays(c.status(), c.logs());
  c.stop_all();

  // Every version changed the int8 view, and only in the matrices that carry adapters: the
  // embeddings, norms and untargeted matrices never appear in a patch.
  const PatchShares shares = patch_shares(c.run_dir());
  const std::map<uint64_t, double> norms = grad_norms(c.run_dir());
  ASSERT_GE(norms.size(), 5u);
  expect_versions_follow_the_gradient(shares, norms);
  // The restart's own version (published from the resumed adapters before any step) is the
  // version before it exactly: an empty patch.
  int republished = 0;
  for (const auto& [version, share] : shares.int8_share) {
    if (norms.count(version)) continue;
    ++republished;
    EXPECT_EQ(share, 0) << "version " << version << " after the restart differs from the last";
  }
  EXPECT_EQ(republished, 1);
  train::LoraOptions lora = train::LoraOptions{};
  lora.rank = 4;
  lora.targets = {"q_proj", "v_proj", "w1"};
  std::set<std::string> targets;
  const ModelConfig config = load_model_config((assets().model / "config.json").string());
  for (const auto& t : train::lora_targets(config, lora)) targets.insert(t.weight);
  for (const auto& name : shares.touched)
    EXPECT_TRUE(targets.count(name)) << name << " has no adapter, yet a LoRA patch wrote it";
  fs::remove_all(fs::temp_directory_path() / ("stoa_lora_run_env_" + std::to_string(::getpid())));
}

// LoRA on two data-parallel ranks in a split run (`stoa hub` + `stoa train --config --nproc 2`):
// the ranks all-reduce the adapters' gradients only, rank 0 publishes the merged view, and the
// hub's replay of every rollout finds each version the worker applied clean; stopped and started
// again on two ranks, the adapters resume from the checkpoint.
TEST(LoraRun, TwoRanksTrainAdaptersAndResumeThem) {
  if (!have_stoa_run()) GTEST_SKIP() << "`stoa run` is absent (a torch-OFF build): skipped";
  const fs::path env_dir =
      fs::temp_directory_path() / ("stoa_lora_ranks_env_" + std::to_string(::getpid()));
  const SpreadRewardEnv env(env_dir);
  Cluster c("lora_ranks", spread_reward_run(env, [](run::RunConfig& rc) {
              rc.train.lora.rank = 4;
              rc.train.lora.alpha = 8;
              rc.train.lora.targets = {"q_proj", "v_proj", "w1"};
              rc.loop.publisher.anchor_every = 1000;
            }));
  c.start_hub(60s, "", /*alone=*/true);
  c.start_worker("w1");
  const auto train_on_two_ranks = [&] {
    c.start_trainer(c.trainer_join_string(), "", {}, {"--nproc", "2"});
  };
  train_on_two_ranks();
  const auto worker_at_step = [&](int64_t steps) {
    return wait_until(
        [&] {
          if (!c.trainer().running() || !c.hub().running()) return true;
          const auto w = c.worker_status("w1");
          return read_ledger(c.ledger_path()).steps >= steps && w.is_object() &&
                 w["version"].is_number() && w["version"].get<int64_t>() >= 2;
        },
        240s);
  };
  ASSERT_TRUE(worker_at_step(3)) << c.status().dump() << c.logs();
  ASSERT_TRUE(c.trainer().running()) << c.logs();
  EXPECT_NE(c.trainer().err().find("rank 1 of 2"), std::string::npos) << c.trainer().err();
  expect_clean_replays(c.status(), c.logs());
  const fs::path ckpt = c.run_dir() / "checkpoint";
  EXPECT_TRUE(fs::exists(ckpt / "adapters.safetensors")) << c.logs();
  EXPECT_FALSE(fs::exists(ckpt / "model")) << "a LoRA checkpoint holds no model";

  c.trainer().signal(SIGTERM);
  const auto stopped = c.trainer().wait(120s);
  ASSERT_TRUE(stopped.has_value()) << c.logs();
  EXPECT_EQ(*stopped, 0) << c.trainer().err();
  const int64_t stopped_at = read_ledger(c.ledger_path()).steps;
  train_on_two_ranks();
  ASSERT_TRUE(worker_at_step(stopped_at + 2)) << c.status().dump() << c.logs();
  const std::string log = c.trainer().err();
  EXPECT_NE(log.find("resumed from checkpoint"), std::string::npos) << log;
  EXPECT_NE(log.find("LoRA adapters of rank 4"), std::string::npos) << log;
  expect_clean_replays(c.status(), c.logs());
  c.stop_all();
  // Only the adapted matrices ever changed.
  train::LoraOptions lora;
  lora.rank = 4;
  lora.targets = {"q_proj", "v_proj", "w1"};
  std::set<std::string> targets;
  const ModelConfig config = load_model_config((assets().model / "config.json").string());
  for (const auto& t : train::lora_targets(config, lora)) targets.insert(t.weight);
  const PatchShares shares = patch_shares(c.run_dir());
  EXPECT_FALSE(shares.touched.empty());
  for (const auto& name : shares.touched)
    EXPECT_TRUE(targets.count(name)) << name << " has no adapter, yet a LoRA patch wrote it";
  fs::remove_all(env_dir);
}

struct Measured {
  PatchShares shares;
  std::map<uint64_t, double> norms;
};

// `steps` steps of the tiny model with one worker; the patches' shares.
Measured run_and_measure(const SpreadRewardEnv& env, const std::string& name, int steps,
                         const std::function<void(run::RunConfig&)>& adjust) {
  Cluster c(name, spread_reward_run(env, [&](run::RunConfig& rc) {
              rc.loop.max_steps = steps;
              rc.loop.publisher.anchor_every = 1000;
              adjust(rc);
            }));
  c.start_hub();
  c.start_worker("w1");
  EXPECT_EQ(c.hub().wait(120s), 0) << c.logs();  // stops by itself after max_steps
  c.stop_all();
  return {patch_shares(c.run_dir()), grad_norms(c.run_dir())};
}

// The patch share per version with LoRA (rank 8, alpha 16, all-linear) beside full fine-tuning
// at the same learning rate on the same tiny model, printed as measured.
TEST(LoraRun, PatchShareBesideFullFineTuning) {
  if (!have_stoa_run()) GTEST_SKIP() << "`stoa run` is absent (a torch-OFF build): skipped";
  const fs::path env_dir =
      fs::temp_directory_path() / ("stoa_lora_share_env_" + std::to_string(::getpid()));
  const SpreadRewardEnv env(env_dir);
  constexpr int kSteps = 6;
  train::LoraOptions lora;
  lora.rank = 8;
  constexpr double kLr = 1e-3;  // the same for both
  const Measured full = run_and_measure(env, "share_full", kSteps,
                                        [&](run::RunConfig& rc) { rc.train.optimizer.lr = kLr; });
  const Measured adapted = run_and_measure(env, "share_lora", kSteps, [&](run::RunConfig& rc) {
    rc.train.optimizer.lr = kLr;
    rc.train.lora = lora;
  });
  ASSERT_EQ(full.norms.size(), static_cast<size_t>(kSteps));
  ASSERT_EQ(adapted.norms.size(), static_cast<size_t>(kSteps));
  expect_versions_follow_the_gradient(full.shares, full.norms);
  expect_versions_follow_the_gradient(adapted.shares, adapted.norms);
  std::printf("patch share per version (int8 values written / int8 values of the view), lr %g:\n",
              kLr);
  for (uint64_t v = 1; v <= kSteps; ++v)
    std::printf("  version %llu: full fine-tuning %.3f %% (grad norm %.3g), LoRA %.3f %% (%.3g)\n",
                static_cast<unsigned long long>(v), 100 * full.shares.int8_share.at(v),
                full.norms.at(v), 100 * adapted.shares.int8_share.at(v), adapted.norms.at(v));
  std::printf(
      "  mean over steps with a gradient: full fine-tuning %.3f %%, LoRA %.3f %%; tensors "
      "written: %zu, %zu\n",
      100 * mean_share(full.shares, full.norms), 100 * mean_share(adapted.shares, adapted.norms),
      full.shares.touched.size(), adapted.shares.touched.size());
  EXPECT_GT(mean_share(adapted.shares, adapted.norms), 0);
  fs::remove_all(env_dir);
}

}  // namespace
}  // namespace stoa::integration
