// The fully sharded trainer (sharding = fsdp) on real Gloo groups (ranks as threads): its layout
// covers every parameter once; on 1, 2 (distributed_test.cpp's Equivalence, with ZeRO-1) and 3
// ranks it makes the update of the one-process trainer; each rank
// holds 1/N of the masters, gradients and moments; its sharded checkpoints resume bit for bit on
// the same number of ranks and within float rounding on another; its exports (weights, a model
// directory, logits) are the one-process trainer's; a sharded bf16 Hugging Face checkpoint
// streams straight into the shards.
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include <gtest/gtest.h>

#include "model/presets.h"
#include "model/safetensors.h"
#include "model/tensor_source.h"
#include "model/weights.h"
#include "ranks_harness.h"
#include "train/fsdp_layout.h"

namespace stoa::train {
namespace {

namespace fs = std::filesystem;

TrainOptions fsdp_options() {
  TrainOptions o = options();
  o.sharding = Sharding::kFsdp;
  return o;
}

TEST(FsdpLayout, EveryElementBelongsToOneRankAndTheShardsAreEven) {
  for (const char* preset : {"tiny-qwen3", "tiny-lfm2moe", "qwen3-0.6b", "lfm2-8b-a1b"}) {
    const ModelConfig config = preset_config(preset);
    int64_t expected = 0;
    for (const TensorSpec& spec : expected_tensors(config)) expected += shape_numel(spec.shape);
    for (int world : {1, 2, 3, 4}) {
      const FsdpLayout layout = plan_fsdp(config, world);
      EXPECT_EQ(layout.total_numel(), expected) << preset << " world " << world;
      int64_t covered = 0;
      for (size_t u = 0; u < layout.units.size(); ++u) {
        int64_t prev_end = 0;
        for (int r = 0; r < world; ++r) {
          const auto [a, b] = layout.slice(u, r);
          EXPECT_EQ(a, prev_end);
          EXPECT_LE(b - a, layout.units[u].shard);
          covered += b - a;
          prev_end = b;
        }
        EXPECT_EQ(prev_end, layout.units[u].numel);
      }
      EXPECT_EQ(covered, expected);
      // One rank's shard: 1/N of the model plus at most one element of padding per unit.
      EXPECT_LE(layout.shard_numel() * world,
                expected + world * static_cast<int64_t>(layout.units.size()));
    }
  }
}

// Three ranks and one sequence fewer than ranks would need: a rank without a micro-batch still
// takes part in every gather, and the update is still the one-process one.
TEST(FsdpEquivalence, ARankWithoutSequencesOnlyTakesPart) {
  const ModelConfig config = preset_config("tiny-qwen3");
  const ModelWeights init = random_weights(config, 9);
  const auto batch = make_sft(config, 22, 2);
  Trainer plain(init, options());
  plain.sft_step(batch);
  const ModelWeights three =
      train_on_ranks(3, init, fsdp_options(), [&](Trainer& trainer) { trainer.sft_step(batch); });
  expect_same_update(three, plain.weights());
}

// bf16 matmuls (f32 masters, moments, losses): FSDP's blocks, recomputed in the backward and the
// head cut into vocabulary chunks, against the one-process bf16 trainer. bf16 rounds the matmul
// operands, so another blocking of the same products moves the update by more than f32 noise
// (measured 8.5e-5 relative, largest element 1.7e-5 = 1.7 % of one Adam step); the bound is the
// one a change of micro-batching is allowed (distributed_test.cpp: 5 % of one Adam step).
TEST(FsdpEquivalence, Bf16MatmulsMakeTheOneProcessBf16Update) {
  const ModelConfig config = preset_config("tiny-lfm2moe");
  const ModelWeights init = random_weights(config, 10);
  const auto batch = make_groups(config, 14);
  TrainOptions bf16 = options();
  bf16.compute_dtype = DType::kBF16;
  Trainer plain(init, bf16);
  plain.train_step(batch);
  TrainOptions sharded = bf16;
  sharded.sharding = Sharding::kFsdp;
  const ModelWeights two =
      train_on_ranks(2, init, sharded, [&](Trainer& trainer) { trainer.train_step(batch); });
  expect_within_micro_batching_noise("bf16", two, plain.weights(), bf16.optimizer.lr);
  EXPECT_FALSE(same_bits(two, init));
}

TEST(FsdpHoldings, EachRankHoldsItsShareOfMastersGradientsAndMoments) {
  const ModelConfig config = preset_config("tiny-lfm2moe");
  const ModelWeights init = random_weights(config, 5);
  int64_t total = 0;
  for (const auto& [name, t] : init.tensors) total += t.numel();
  const auto batch = make_sft(config, 23, 8);
  for (int world : {2, 4}) {
    std::vector<RankHoldings> fsdp, zero1;
    with_ranks(world, [&](std::shared_ptr<Communicator> ranks) {
      Trainer trainer(init, fsdp_options(), ranks);
      trainer.sft_step(batch);
      fsdp = trainer.holdings();
    });
    with_ranks(world, [&](std::shared_ptr<Communicator> ranks) {
      Trainer trainer(init, options(), ranks);
      trainer.sft_step(batch);
      zero1 = trainer.holdings();
    });
    ASSERT_EQ(fsdp.size(), static_cast<size_t>(world));
    const FsdpLayout layout = plan_fsdp(config, world);
    const int64_t padding = static_cast<int64_t>(layout.units.size());
    int64_t moments = 0;
    for (int r = 0; r < world; ++r) {
      const RankHoldings& h = fsdp[static_cast<size_t>(r)];
      std::printf(
          "world %d rank %d: fsdp masters %lld gradients %lld moments %lld; zero1 %lld %lld %lld\n",
          world, r, static_cast<long long>(h.masters), static_cast<long long>(h.gradients),
          static_cast<long long>(h.moments),
          static_cast<long long>(zero1[static_cast<size_t>(r)].masters),
          static_cast<long long>(zero1[static_cast<size_t>(r)].gradients),
          static_cast<long long>(zero1[static_cast<size_t>(r)].moments));
      EXPECT_EQ(h.masters, layout.shard_numel());
      EXPECT_LE(h.masters, total / world + padding);
      EXPECT_EQ(h.gradients, h.masters);
      EXPECT_LE(h.moments, 2 * (total / world + padding));
      moments += h.moments;
      EXPECT_EQ(zero1[static_cast<size_t>(r)].masters, total);  // ZeRO-1: a full copy each
    }
    // Every trained element has its two moments exactly once across the ranks (the routing bias
    // is not trained; experts no token reached have none yet).
    EXPECT_LE(moments, 2 * total);
    EXPECT_GT(moments, total);
  }
}

TEST(FsdpCheckpoint, ResumesExactlyOnTheSameRanksAndReshardsToOthers) {
  const ModelConfig config = preset_config("tiny-lfm2moe");
  const ModelWeights init = random_weights(config, 5);
  const fs::path dir = fs::temp_directory_path() / "stoa_fsdp_resume";
  const CheckpointedRun run = run_with_checkpoint(config, init, fsdp_options(), dir.string());
  auto last_two = [&](Trainer& trainer) { run.last_two(trainer); };
  const ModelWeights& straight = run.straight;
  EXPECT_TRUE(fs::exists(dir / "shards" / "rank-00001-of-00002.safetensors"));
  // The model beside the shards (streamed through rank 0, for evaluation and export) holds the
  // checkpoint's weights; resuming reads the shards.
  const ModelWeights at_checkpoint = load_model_dir((dir / "model").string());
  const ModelWeights resumed_two =
      resume_on_ranks(2, dir.string(), fsdp_options(), [&](Trainer& trainer) {
        EXPECT_EQ(trainer.step_count(), 2);
        last_two(trainer);
      });
  EXPECT_TRUE(same_bits(straight, resumed_two));  // N -> N: bit for bit
  Trainer again = Trainer::resume(dir.string(), fsdp_options());
  EXPECT_TRUE(same_bits(again.weights(), at_checkpoint));
  const ModelWeights resumed_three = resume_on_ranks(3, dir.string(), fsdp_options(), last_two);
  expect_same_update(resumed_three, straight);  // N -> M: re-sliced
  Trainer one = Trainer::resume(dir.string(), fsdp_options());
  last_two(one);
  expect_same_update(one.weights(), straight);
  // The wrong kind of trainer is told which to use.
  try {
    Trainer::resume(dir.string(), options());
    FAIL() << "a zero1 trainer resumed an FSDP checkpoint";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("sharding = fsdp"), std::string::npos) << e.what();
  }
  fs::remove_all(dir);
}

TEST(FsdpExport, WeightsModelDirectoryAndLogitsMatchTheOneProcessTrainer) {
  const ModelConfig config = preset_config("tiny-lfm2moe");
  const ModelWeights init = random_weights(config, 6);
  const auto batch = make_sft(config, 24);
  Trainer plain(init, options());
  plain.sft_step(batch);
  const std::vector<int32_t> prompt = {1, 5, 9, 3, 7, 2};
  const Tensor expected = plain.logits(prompt);
  const fs::path dir = fs::temp_directory_path() / "stoa_fsdp_export";
  fs::remove_all(dir);
  Tensor logits;
  with_ranks(2, [&](std::shared_ptr<Communicator> ranks) {
    // From a streamed source, as `stoa train --sharding fsdp` starts: no whole copy in memory.
    RandomTensorSource source(config, 6);
    Trainer trainer(source, fsdp_options(), ranks);
    trainer.sft_step(batch);
    logits = trainer.logits(prompt);
    trainer.save_model(dir.string(), DType::kBF16);  // MoE + bf16: the routing bias stays f32
  });
  ASSERT_EQ(logits.numel(), expected.numel());
  double worst = 0;
  for (int64_t i = 0; i < logits.numel(); ++i)
    worst = std::max(
        worst, std::fabs(static_cast<double>(logits.as<float>()[i]) - expected.as<float>()[i]));
  EXPECT_LT(worst, 1e-4);
  const ModelWeights saved = load_model_dir(dir.string());
  ModelWeights plain_bf16 = plain.weights();
  save_model_dir(plain_bf16, (dir.string() + "-plain"), DType::kBF16);
  const ModelWeights reference = load_model_dir(dir.string() + "-plain");
  EXPECT_LT(relative_difference(saved, reference), 1e-2);  // bf16 rounding of tiny differences
  fs::remove_all(dir);
  fs::remove_all(dir.string() + "-plain");
}

// A Hugging Face checkpoint as the seed's ships: bf16 safetensors in two shards with an index.
// Two FSDP ranks start from it straight (rank 0 streams one tensor at a time) and hold exactly
// its values.
TEST(FsdpLoad, AShardedBf16HuggingFaceCheckpointStreamsIntoTheShards) {
  const ModelConfig config = preset_config("tiny-lfm2moe");
  const ModelWeights init = random_weights(config, 12);
  const fs::path dir = fs::temp_directory_path() / "stoa_fsdp_hf_sharded";
  fs::remove_all(dir);
  save_model_dir(init, dir.string(), DType::kBF16);  // config.json (+ one file, replaced below)
  fs::remove(dir / "model.safetensors");
  std::vector<Tensor> keep;
  std::vector<NamedView> parts[2];
  nlohmann::json index = {{"metadata", nlohmann::json::object()},
                          {"weight_map", nlohmann::json::object()}};
  size_t i = 0;
  for (const auto& [name, tensor] : init.tensors) {
    keep.push_back(convert_float(tensor.view(), DType::kBF16));
    const int file = static_cast<int>(i++ % 2);
    parts[file].emplace_back(name, keep.back().view());
    index["weight_map"][name] = "model-0000" + std::to_string(file + 1) + "-of-00002.safetensors";
  }
  for (int f = 0; f < 2; ++f) {
    write_safetensors(
        (dir / ("model-0000" + std::to_string(f + 1) + "-of-00002.safetensors")).string(), parts[f],
        {{"format", "pt"}});
  }
  std::ofstream(dir / "model.safetensors.index.json") << index.dump();
  const ModelWeights expected = load_model_dir(dir.string());  // bf16 -> f32, the same rounding
  ModelWeights loaded;
  with_ranks(2, [&](std::shared_ptr<Communicator> ranks) {
    ModelDirTensorSource source(dir.string());
    Trainer trainer(source, fsdp_options(), ranks);
    loaded = trainer.weights();
  });
  EXPECT_TRUE(same_bits(loaded, expected));
  EXPECT_FALSE(same_bits(loaded, init));  // it did read the bf16 values
  fs::remove_all(dir);
}

}  // namespace
}  // namespace stoa::train
