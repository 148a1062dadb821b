// The demo's run.toml round-trips through the trainer's own parser: what `stoa demo` and
// `stoa experiment ablations` write is what `stoa run` trains with (loss, δ, staleness, PULSE).
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "app/demo/demo_rl.h"
#include "roles/run/run_config.h"

namespace stoa::app {
namespace {

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          ("stoa-" + name + "-" + std::to_string(::getpid()) + ".toml"))
      .string();
}

TEST(DemoRunConfig, DefaultsRoundTrip) {
  RlOptions o;
  const DemoPaths p("/tmp/stoa-demo-x");
  const std::string path = temp_path("runcfg-default");
  write_run_config(o, p, "/m", "/r", path, "tok");
  const run::RunConfig c = run::load_run_config(path);
  std::filesystem::remove(path);
  EXPECT_EQ(c.model_dir, "/m");
  EXPECT_EQ(c.run_dir, "/r");
  EXPECT_EQ(c.train.loss.kind, train::LossKind::kDppoBinaryTv);
  EXPECT_DOUBLE_EQ(c.train.loss.delta_hi, train::LossConfig{}.delta_hi);  // delta 0: default
  EXPECT_EQ(c.loop.staleness.max_staleness, static_cast<uint64_t>(o.max_staleness));
  EXPECT_DOUBLE_EQ(c.train.optimizer.lr, o.lr);
}

TEST(DemoRunConfig, KlVariantCarriesItsThreshold) {
  RlOptions o;
  o.loss = "dppo-binary-kl";
  o.delta = 0.05;
  o.max_staleness = 4;
  const DemoPaths p("/tmp/stoa-demo-x");
  const std::string path = temp_path("runcfg-kl");
  write_run_config(o, p, "/m", "/r", path, "tok");
  const run::RunConfig c = run::load_run_config(path);
  std::filesystem::remove(path);
  EXPECT_EQ(c.train.loss.kind, train::LossKind::kDppoBinaryKl);
  EXPECT_DOUBLE_EQ(c.train.loss.delta_hi, 0.05);
  EXPECT_DOUBLE_EQ(c.train.loss.delta_lo, 0.05);
  EXPECT_EQ(c.loop.staleness.max_staleness, 4u);
}

TEST(DemoRunConfig, TruncatedIsCarriesItsRatioCap) {
  RlOptions o;
  o.loss = "truncated-is";
  o.ratio_cap = 10;
  const DemoPaths p("/tmp/stoa-demo-x");
  const std::string path = temp_path("runcfg-tis");
  write_run_config(o, p, "/m", "/r", path, "tok");
  const run::RunConfig c = run::load_run_config(path);  // refused without a finite cap
  std::filesystem::remove(path);
  EXPECT_EQ(c.train.loss.kind, train::LossKind::kTruncatedIs);
  EXPECT_DOUBLE_EQ(c.train.loss.ratio_cap, 10.0);
}

// `stoa demo --lora 8`: the adapters on every matrix, the base frozen in the trainer's dtype, at
// the LoRA learning rate; without it no [trainer.lora] (full fine-tuning).
TEST(DemoRunConfig, LoraCarriesItsRankAlphaAndLearningRate) {
  RlOptions o;
  o.lora_rank = 8;
  o.lora_alpha = 16;
  o.lora_lr = 1e-3;
  const DemoPaths p("/tmp/stoa-demo-x");
  const std::string path = temp_path("runcfg-lora");
  write_run_config(o, p, "/m", "/r", path, "tok");
  const run::RunConfig c = run::load_run_config(path);
  std::filesystem::remove(path);
  EXPECT_EQ(c.train.lora.rank, 8);
  EXPECT_DOUBLE_EQ(c.train.lora.alpha, 16.0);
  EXPECT_EQ(c.train.lora.targets, std::vector<std::string>{"all-linear"});
  EXPECT_EQ(c.train.lora.base_dtype, DType::kF32);  // the demo's trainer computes in f32
  EXPECT_DOUBLE_EQ(c.train.optimizer.lr, 1e-3);

  const std::string plain = temp_path("runcfg-nolora");
  write_run_config(RlOptions{}, p, "/m", "/r", plain, "tok");
  const run::RunConfig full = run::load_run_config(plain);
  std::filesystem::remove(plain);
  EXPECT_FALSE(full.train.lora.enabled());
  EXPECT_DOUBLE_EQ(full.train.optimizer.lr, RlOptions{}.lr);
}

// `stoa experiment ablations` keeps <variant>/run inside the phase's log directory: clearing the
// old logs must not remove it (it once did, and the phase could not write its run.toml).
TEST(DemoRunConfig, ClearingPhaseLogsKeepsTheRunDirectory) {
  namespace fs = std::filesystem;
  const fs::path dir =
      fs::temp_directory_path() / ("stoa-phase-logs-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir / "run");
  for (const char* f : {"run.log", "worker-w1.log", "eval-after.json"})
    std::ofstream(dir / f) << "x";
  clear_phase_logs(dir.string());
  EXPECT_TRUE(fs::is_directory(dir / "run"));
  EXPECT_FALSE(fs::exists(dir / "run.log"));
  EXPECT_FALSE(fs::exists(dir / "worker-w1.log"));
  EXPECT_TRUE(fs::exists(dir / "eval-after.json"));
  fs::remove_all(dir);
}

}  // namespace
}  // namespace stoa::app
