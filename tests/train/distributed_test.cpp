// Data-parallel trainer on real Gloo process groups (a TCPStore on a free port; each rank a
// thread with its own group): 2 ranks on one batch make the same update as 1 rank under both
// shardings (DPPO and SFT, parameters within 1e-6 relative), checkpoints from 2 ranks resume
// exactly on 2 and closely on 1, a 1-rank checkpoint resumes on 2, and a rank that never joins
// fails the rendezvous at its timeout instead of hanging.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <functional>
#include <random>
#include <thread>
#include <tuple>

#include <gtest/gtest.h>

#include "core/error.h"
#include "model/presets.h"
#include "ranks_harness.h"
#include "support/param_names.h"
#include "train/distributed.h"
#include "train/trainer.h"

namespace stoa::train {
namespace {

namespace fs = std::filesystem;

// Both ways of dividing the training state across ranks, ZeRO-1 (moments) and FSDP (masters,
// gradients and moments: fsdp_test.cpp has its layout, holdings and checkpoints), make the update
// of the one-process trainer; FSDP on one rank too (its own code path: gathers and reduce-scatters
// of one).
using EquivalenceCase = std::tuple<const char*, Sharding>;
class Equivalence : public ::testing::TestWithParam<EquivalenceCase> {
 protected:
  ModelConfig config() const { return preset_config(std::get<0>(GetParam())); }
  TrainOptions sharded() const {
    TrainOptions o = options();
    o.sharding = std::get<1>(GetParam());
    return o;
  }
};

TEST_P(Equivalence, OneAndTwoRanksMakeTheOneProcessUpdateDppo) {
  const ModelWeights init = random_weights(config(), 3);
  const auto batch1 = make_groups(config(), 11), batch2 = make_groups(config(), 12);
  Trainer plain(init, options());
  const StepMetrics m1 = plain.train_step(batch1);
  plain.train_step(batch2);  // the second step uses the (sharded) moments
  Trainer alone(init, sharded());
  alone.train_step(batch1);
  alone.train_step(batch2);
  expect_same_update(alone.weights(), plain.weights());
  StepMetrics m2;
  const ModelWeights two = train_on_ranks(2, init, sharded(), [&](Trainer& trainer) {
    m2 = trainer.train_step(batch1);
    trainer.train_step(batch2);
  });
  expect_same_update(two, plain.weights());
  EXPECT_FALSE(same_bits(two, init));
  expect_same_metrics(m2, m1);
}

TEST_P(Equivalence, TwoRanksMakeTheOneProcessUpdateSft) {
  const ModelWeights init = random_weights(config(), 4);
  const auto batch = make_sft(config(), 21);
  Trainer plain(init, options());
  const StepMetrics m1 = plain.sft_step(batch);
  plain.sft_step(batch);
  StepMetrics m2;
  const ModelWeights two = train_on_ranks(2, init, sharded(), [&](Trainer& trainer) {
    m2 = trainer.sft_step(batch);
    trainer.sft_step(batch);
  });
  expect_same_update(two, plain.weights());
  EXPECT_NEAR(m2.loss, m1.loss, 1e-6 * std::fabs(m1.loss));
  EXPECT_EQ(m2.tokens_total, m1.tokens_total);
}

// At the default eps the ranks stay within the bound tests/train/step_test.cpp allows a change
// of micro-batching (5 % of one Adam step).
TEST(DistributedEquivalence, DefaultEpsStaysWithinTheMicroBatchingNoise) {
  const ModelConfig config = preset_config("tiny-qwen3");
  const ModelWeights init = random_weights(config, 8);
  const auto batch = make_groups(config, 13);
  TrainOptions o = options();
  o.optimizer.eps = 1e-8;
  Trainer one(init, o);
  one.train_step(batch);
  const ModelWeights two =
      train_on_ranks(2, init, o, [&](Trainer& trainer) { trainer.train_step(batch); });
  expect_within_micro_batching_noise("default eps", two, one.weights(), o.optimizer.lr);
}

// tiny-lfm2moe: experts no token reached have no gradient on any rank and must stay untouched.
INSTANTIATE_TEST_SUITE_P(TinyPresets, Equivalence,
                         ::testing::Combine(::testing::Values("tiny-qwen3", "tiny-lfm2moe"),
                                            ::testing::Values(Sharding::kZero1, Sharding::kFsdp)),
                         [](const ::testing::TestParamInfo<EquivalenceCase>& param_info) {
                           return stoa::test::param_name(
                               std::string(std::get<0>(param_info.param)) + "_" +
                               sharding_name(std::get<1>(param_info.param)));
                         });

TEST(DistributedCheckpoint, ResumesExactlyOnTwoRanksAndReshardsToOne) {
  const ModelConfig config = preset_config("tiny-qwen3");
  const ModelWeights init = random_weights(config, 5);
  const fs::path dir = fs::temp_directory_path() / "stoa_distributed_resume";
  const CheckpointedRun run = run_with_checkpoint(config, init, options(), dir.string());
  const ModelWeights resumed_two = resume_on_ranks(2, dir.string(), options(), [&](Trainer& t) {
    EXPECT_EQ(t.step_count(), 2);
    run.last_two(t);
  });
  EXPECT_TRUE(same_bits(run.straight, resumed_two));       // N → N: bit for bit
  Trainer one = Trainer::resume(dir.string(), options());  // N → 1: re-sharded
  run.last_two(one);
  expect_same_update(one.weights(), run.straight);
  EXPECT_FALSE(same_bits(one.weights(), init));
  fs::remove_all(dir);
}

TEST(DistributedCheckpoint, OneRankCheckpointResumesOnTwo) {
  const ModelConfig config = preset_config("tiny-qwen3");
  const ModelWeights init = random_weights(config, 6);
  const auto a = make_groups(config, 50), b = make_groups(config, 51);
  const fs::path dir = fs::temp_directory_path() / "stoa_distributed_resume_1to2";
  fs::remove_all(dir);
  Trainer one(init, options());
  one.train_step(a);
  one.save_checkpoint(dir.string());
  one.train_step(b);
  const ModelWeights two =
      resume_on_ranks(2, dir.string(), options(), [&](Trainer& trainer) { trainer.train_step(b); });
  expect_same_update(two, one.weights());
  fs::remove_all(dir);
}

TEST(DistributedRendezvous, AMissingRankTimesOutInsteadOfHanging) {
  RendezvousServer server(2, 10);
  RendezvousOptions o;
  o.rank = 0;
  o.world_size = 2;
  o.master_port = server.port();
  o.agent_store = true;
  o.timeout_s = 2;
  const auto start = std::chrono::steady_clock::now();
  try {
    connect_ranks(o);
    FAIL() << "joined a group of 2 alone";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kNetwork) << e.what();
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(30));
}

}  // namespace
}  // namespace stoa::train
