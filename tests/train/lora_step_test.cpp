// LoRA in the one-process trainer (train/lora.h): at step 0 the model is the base exactly; DPPO
// and SFT steps move only the adapters (the base's bytes keep their hash, untargeted tensors keep
// their bits) and what the trainer holds is what the memory plan counts; a checkpoint holds only
// the adapters, their AdamW state and the base's hash, and resumes bit for bit on that base only.
#include <cstring>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include <gtest/gtest.h>

#include "core/dtype.h"
#include "core/error.h"
#include "core/rng.h"
#include "model/presets.h"
#include "model/tensor_source.h"
#include "train/memory_plan.h"
#include "train/trainer.h"

namespace stoa::train {
namespace {

namespace fs = std::filesystem;

TrainOptions options(int64_t rank = 4, DType base = DType::kF32) {
  TrainOptions o;
  o.threads = 1;
  o.optimizer.lr = 1e-2;
  o.seed = 42;
  o.lora.rank = rank;
  o.lora.alpha = 8;
  o.lora.base_dtype = base;
  return o;
}

// Rollouts of random tokens, behaviour log-probs the trainer's own plus noise.
std::vector<RolloutGroup> groups(const Trainer& trainer, uint64_t seed) {
  Rng rng(seed, 1);
  std::vector<RolloutGroup> out;
  for (int g = 0; g < 2; ++g) {
    RolloutGroup group{"g" + std::to_string(g), {}};
    for (int i = 0; i < 3; ++i) {
      Rollout r;
      r.id = group.id + "-r" + std::to_string(i);
      for (int t = 0; t < 12 + 2 * i; ++t) {
        r.tokens.push_back(static_cast<int32_t>(rng.below(trainer.config().vocab_size)));
        r.trainable.push_back(t >= 4);
      }
      for (float lp : trainer.token_logprobs(r.tokens))
        r.behaviour_logprobs.push_back(std::min(0.0f, lp + 0.3f * (rng.uniform_float() - 0.5f)));
      r.reward = (i + g) % 2;
      group.rollouts.push_back(std::move(r));
    }
    out.push_back(std::move(group));
  }
  return out;
}

std::vector<SftExample> sft_batch(const ModelConfig& c) {
  Rng rng(5, 2);
  std::vector<SftExample> batch(2);
  for (SftExample& ex : batch) {
    ex.id = "s";
    for (int t = 0; t < 10; ++t) {
      ex.tokens.push_back(static_cast<int32_t>(rng.below(c.vocab_size)));
      ex.mask.push_back(t >= 3);
    }
  }
  return batch;
}

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.nbytes() == b.nbytes() && std::memcmp(a.data(), b.data(), a.nbytes()) == 0;
}

void expect_same_logits(const Trainer& a, const Trainer& b, const std::string& what) {
  const std::vector<int32_t> tokens = {1, 5, 9, 2, 7, 3, 11, 4};
  EXPECT_TRUE(same_bits(a.logits(tokens), b.logits(tokens))) << what;
}

TEST(LoraTrainer, AtStepZeroTheModelIsTheBase) {
  for (const char* preset : {"tiny-qwen3", "tiny-lfm2", "tiny-lfm2moe"}) {
    const ModelWeights init = random_weights(preset_config(preset), 21);
    TrainOptions full = options(0);
    Trainer base(init, full);
    Trainer lora(init, options(4, DType::kF32));
    expect_same_logits(base, lora, std::string(preset) + ", f32 base");
    for (const auto& [name, t] : lora.weights().tensors)
      EXPECT_TRUE(same_bits(t, init.at(name))) << preset << " " << name;
    // A bf16 base is the base rounded to bf16, exactly.
    ModelWeights rounded = random_weights(preset_config(preset), 21);  // Tensor: no copy
    for (auto& [name, t] : rounded.tensors) {
      float* v = static_cast<float*>(t.data());
      for (int64_t i = 0; i < t.numel(); ++i) v[i] = bf16_to_f32(f32_to_bf16(v[i]));
    }
    Trainer base_bf16(rounded, full);
    Trainer lora_bf16(init, options(4, DType::kBF16));
    expect_same_logits(base_bf16, lora_bf16, std::string(preset) + ", bf16 base");
  }
}

TEST(LoraTrainer, StepsMoveOnlyTheAdaptersAndTheHoldingsAreThePlans) {
  const ModelConfig config = preset_config("tiny-lfm2moe");
  const ModelWeights init = random_weights(config, 21);
  TrainOptions o = options(4, DType::kBF16);
  o.lora.targets = {"q_proj", "w1", "in_proj"};
  Trainer trainer(init, o);
  const std::string base_hash = trainer.base_hash();
  for (int s = 0; s < 2; ++s) {
    const StepMetrics m = trainer.train_step(groups(trainer, 100 + s));
    EXPECT_TRUE(std::isfinite(m.loss));
    EXPECT_GT(m.grad_norm, 0);
  }
  EXPECT_TRUE(std::isfinite(trainer.sft_step(sft_batch(config)).loss));
  EXPECT_EQ(trainer.base_hash(), base_hash);  // the frozen base's bytes are untouched
  int64_t moved_b = 0;
  trainer.for_each_adapter([&](const std::string& name, const Shape& shape, const float* v) {
    if (name.find("lora_B") == std::string::npos) return;
    for (int64_t i = 0; i < shape_numel(shape); ++i) moved_b += v[i] != 0.0f;
  });
  EXPECT_GT(moved_b, 0);
  // The merged view: targeted matrices moved, everything else is the base's bf16 value.
  const std::vector<LoraTarget> targets = lora_targets(config, o.lora);
  for (const auto& [name, merged] : trainer.weights().tensors) {
    const bool targeted = std::any_of(targets.begin(), targets.end(),
                                      [&](const LoraTarget& t) { return t.weight == name; });
    const float* got = static_cast<const float*>(merged.data());
    const float* was = static_cast<const float*>(init.at(name).data());
    int64_t differs = 0;
    for (int64_t i = 0; i < merged.numel(); ++i)
      differs += got[i] != bf16_to_f32(f32_to_bf16(was[i]));
    if (targeted) {
      EXPECT_GT(differs, 0) << name;
    } else {
      EXPECT_EQ(differs, 0) << name;
    }
  }
  // What the trainer holds, against the plan's counts.
  const RankHoldings h = trainer.holdings().at(0);
  MemoryPlanOptions plan_options;
  plan_options.lora = o.lora;
  const RankMemoryPlan plan = plan_rank_memory(config, plan_options);
  EXPECT_EQ(2 * h.masters, plan.frozen_base);  // bf16 base elements
  EXPECT_EQ(4 * h.gradients, plan.gradients);
  EXPECT_EQ(4 * h.moments, plan.moments);
  EXPECT_EQ(h.gradients, lora_adapter_numel(config, o.lora));
}

// Steps 3 and 4 of a run resumed from its step-2 checkpoint against the same run never stopped.
TEST(LoraCheckpoint, HoldsOnlyTheAdaptersAndResumesBitExactOnItsBase) {
  for (const char* preset : {"tiny-qwen3", "tiny-lfm2"}) {
    const ModelWeights init = random_weights(preset_config(preset), 21);
    TrainOptions o = options(4, DType::kBF16);
    o.lora.dropout = 0.1;  // seeded per step: the resumed run drops the same elements
    const fs::path dir = fs::temp_directory_path() / ("stoa_lora_resume_" + std::string(preset));
    fs::remove_all(dir);
    Trainer probe(init, o);
    std::vector<std::vector<RolloutGroup>> batches;
    for (int s = 0; s < 4; ++s) batches.push_back(groups(probe, 200 + s));

    Trainer straight(init, o);
    std::vector<double> losses;
    for (const auto& batch : batches) losses.push_back(straight.train_step(batch).loss);

    Trainer first(init, o);
    first.train_step(batches[0]);
    first.train_step(batches[1]);
    first.save_checkpoint(dir.string());
    // Only the adapters: far fewer bytes than the base, no model directory.
    EXPECT_TRUE(fs::exists(dir / "adapters.safetensors"));
    EXPECT_TRUE(fs::exists(dir / "optimizer.pt"));
    EXPECT_FALSE(fs::exists(dir / "model"));
    int64_t base_bytes = 0;
    for (const auto& [name, t] : init.tensors) base_bytes += static_cast<int64_t>(t.nbytes()) / 2;
    int64_t adapter_bytes = static_cast<int64_t>(fs::file_size(dir / "adapters.safetensors"));
    EXPECT_LT(adapter_bytes, base_bytes) << preset;
    nlohmann::json meta;
    std::ifstream(dir / "trainer.json") >> meta;
    EXPECT_EQ(meta.at("lora").at("base_hash").get<std::string>(), first.base_hash());
    EXPECT_EQ(meta.at("lora").at("rank").get<int64_t>(), 4);

    TrainOptions other = o;
    other.lora = LoraOptions{};  // the checkpoint's LoRA settings win
    Trainer second = Trainer::resume(dir.string(), WeightsTensorSource(init), other);
    EXPECT_EQ(second.step_count(), 2);
    EXPECT_EQ(second.train_step(batches[2]).loss, losses[2]) << preset;
    EXPECT_EQ(second.train_step(batches[3]).loss, losses[3]) << preset;
    for (const auto& [name, t] : straight.weights().tensors)
      EXPECT_TRUE(same_bits(t, second.weights().at(name))) << preset << " " << name;

    // Refused: another base (its hash differs), and a resume that names no base at all.
    const ModelWeights stranger = random_weights(preset_config(preset), 22);
    try {
      Trainer::resume(dir.string(), WeightsTensorSource(stranger), o);
      ADD_FAILURE() << "resumed on another base";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kIntegrity) << e.what();
    }
    EXPECT_THROW(Trainer::resume(dir.string(), o), Error);
    fs::remove_all(dir);
  }
}

TEST(LoraTrainer, RunsInOneProcessOnly) {
  const ModelWeights init = random_weights(preset_config("tiny-qwen3"), 21);
  TrainOptions o = options(4);
  o.sharding = Sharding::kFsdp;
  EXPECT_THROW(Trainer(init, o), Error);
  o = options(4);
  o.lora.targets = {"no_such_module"};
  EXPECT_THROW(Trainer(init, o), Error);
}

}  // namespace
}  // namespace stoa::train
