// LoRA's targets and the memory plan with LoRA (train/lora.h, train/memory_plan.h): the adapters
// attach to the matrices the targets name (PEFT's suffix rule), never to a router or the head;
// the plan holds the base frozen in its dtype and the adapters with f32 gradients and moments.
#include <gtest/gtest.h>

#include "core/error.h"
#include "model/presets.h"
#include "model/weights.h"
#include "train/lora.h"
#include "train/memory_plan.h"

namespace stoa::train {
namespace {

LoraOptions lora(int64_t rank, std::vector<std::string> targets = {"all-linear"}) {
  LoraOptions o;
  o.rank = rank;
  o.targets = std::move(targets);
  return o;
}

TEST(LoraTargets, ASuffixNamesTheSameMatrixInEveryLayer) {
  const ModelConfig c = preset_config("tiny-qwen3");
  const std::vector<LoraTarget> q = lora_targets(c, lora(4, {"q_proj"}));
  ASSERT_EQ(static_cast<int64_t>(q.size()), c.num_layers);
  for (const LoraTarget& t : q) {
    EXPECT_EQ(t.module + ".weight", t.weight);
    EXPECT_EQ(t.out, c.num_heads * c.head_dim);
    EXPECT_EQ(t.in, c.hidden_size);
    EXPECT_EQ(t.adapter_numel(4), 4 * (t.in + t.out));
    EXPECT_EQ(lora_a_name(t), t.module + ".lora_A.weight");
    EXPECT_EQ(lora_b_name(t), t.module + ".lora_B.weight");
  }
  // "self_attn.q_proj" is the same set; "proj" is no module's last name part.
  EXPECT_EQ(lora_targets(c, lora(4, {"self_attn.q_proj"})).size(), q.size());
  EXPECT_THROW(lora_targets(c, lora(4, {"proj"})), Error);
}

TEST(LoraTargets, AllLinearTakesEveryLayerMatrixButTheRoutersAndTheHead) {
  const ModelConfig c = preset_config("tiny-lfm2moe");
  int64_t matrices = 0;
  for (const TensorSpec& spec : expected_tensors(c)) {
    const bool in_layer = spec.name.rfind("model.layers.", 0) == 0;
    const bool router = spec.name.find("feed_forward.gate.") != std::string::npos;
    if (in_layer && spec.shape.size() == 2 && !router) ++matrices;
  }
  const std::vector<LoraTarget> all = lora_targets(c, lora(2));
  EXPECT_EQ(static_cast<int64_t>(all.size()), matrices);
  for (const LoraTarget& t : all) {
    EXPECT_EQ(t.weight.find("feed_forward.gate."), std::string::npos) << t.weight;
    EXPECT_EQ(t.weight.find("lm_head"), std::string::npos) << t.weight;
  }
  bool expert = false;
  for (const LoraTarget& t : all)
    expert = expert || t.weight.find(".experts.") != std::string::npos;
  EXPECT_TRUE(expert);
}

TEST(LoraTargets, BadOptionsAreRefusedByName) {
  const ModelConfig c = preset_config("tiny-qwen3");
  EXPECT_TRUE(lora_targets(c, lora(0)).empty());  // off
  for (auto bad : {lora(-1), lora(4, {}), lora(4, {"embed_tokens"})})
    EXPECT_THROW(lora_targets(c, bad), Error);
  LoraOptions o = lora(4);
  o.dropout = 1.0;
  EXPECT_THROW(validate_lora_options(o), Error);
  o = lora(4);
  o.alpha = 0;
  EXPECT_THROW(validate_lora_options(o), Error);
  o = lora(4);
  o.base_dtype = DType::kI8;
  EXPECT_THROW(validate_lora_options(o), Error);
}

TEST(LoraMemoryPlan, TheBaseIsFrozenInItsDtypeAndOnlyTheAdaptersTrain) {
  for (const char* preset : {"tiny-qwen3", "tiny-lfm2moe", "lfm2-8b-a1b"}) {
    const ModelConfig c = preset_config(preset);
    int64_t base = 0;
    for (const TensorSpec& spec : expected_tensors(c)) base += shape_numel(spec.shape);
    MemoryPlanOptions o;
    o.compute = DType::kBF16;
    o.lora = lora(16);
    const int64_t adapters = lora_adapter_numel(c, o.lora);
    const RankMemoryPlan p = plan_rank_memory(c, o);
    EXPECT_EQ(p.frozen_base, 2 * base) << preset;
    EXPECT_EQ(p.masters, 4 * adapters) << preset;
    EXPECT_EQ(p.gradients, 4 * adapters) << preset;
    EXPECT_EQ(p.moments, 8 * adapters) << preset;
    EXPECT_EQ(p.gathered, 0) << preset;
    EXPECT_EQ(p.total(), p.frozen_base + 16 * adapters + p.transient()) << preset;
    // Against full fine-tuning of the seed's model on one process: the state shrinks from 16
    // bytes per parameter to 2 per base parameter plus 16 per adapter parameter (on the tiny
    // presets rank 16 is a large part of the hidden size, so the adapters are not small there).
    if (std::string(preset) == "lfm2-8b-a1b") {
      MemoryPlanOptions full = o;
      full.lora = LoraOptions{};
      full.sharding = Sharding::kZero1;
      const RankMemoryPlan f = plan_rank_memory(c, full);
      EXPECT_LT(p.frozen_base + p.masters + p.gradients + p.moments,
                (f.masters + f.gradients + f.moments) / 6);
    }
    // An f32 base with bf16 matmuls keeps a cast copy of each weight for the backward.
    MemoryPlanOptions f32_base = o;
    f32_base.lora.base_dtype = DType::kF32;
    EXPECT_EQ(plan_rank_memory(c, f32_base).frozen_base, 4 * base) << preset;
  }
}

}  // namespace
}  // namespace stoa::train
