// The tensor-role tables: the tensor list they expand to (order included: it is the GGUF file's
// tensor order), lookup by role for the engine and trainer binders, and the name patterns the
// precision plan matches.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "core/error.h"
#include "model/arch_registry.h"
#include "model/presets.h"
#include "model/tensor_roles.h"
#include "model/weights.h"

namespace stoa {
namespace {

std::vector<std::string> slot_names(const ModelConfig& c, int64_t layer) {
  std::vector<std::string> out;
  for (const TensorSlot& slot : tensor_slots(c)) {
    if (slot.layer == layer) out.push_back(slot.name);
  }
  return out;
}

TEST(TensorRoles, EachRoleHasOneRowPerTable) {
  for (const ArchInfo* arch : all_archs()) {
    std::set<TensorRole> seen;
    for (const TensorRoleRow& row : arch->tensor_roles) {
      EXPECT_TRUE(seen.insert(row.role).second)
          << arch->name << " lists " << tensor_role_name(row.role) << " twice";
    }
  }
}

TEST(TensorRoles, EverySlotIsFoundAgainByItsRole) {
  for (const PresetInfo& preset : model_presets()) {
    ModelConfig c = preset_config(preset.name);
    std::vector<TensorSpec> specs = expected_tensors(c);
    std::vector<TensorSlot> slots = tensor_slots(c);
    ASSERT_EQ(slots.size(), specs.size()) << preset.name;
    for (size_t i = 0; i < slots.size(); ++i) {
      const TensorSlot& slot = slots[i];
      EXPECT_EQ(slot.name, specs[i].name);
      EXPECT_EQ(slot.shape, specs[i].shape);
      EXPECT_TRUE(has_tensor(c, slot.row->role, slot.layer)) << slot.name;
      TensorSlot again = tensor_slot(c, slot.row->role, slot.layer, slot.expert);
      EXPECT_EQ(again.name, slot.name) << preset.name;
      EXPECT_EQ(again.shape, slot.shape) << slot.name;
      EXPECT_TRUE(tensor_pattern_matches(slot.row->hf_name, slot.name)) << slot.name;
    }
  }
}

TEST(TensorRoles, Qwen3LayerOrderAndNames) {
  ModelConfig c = preset_config("tiny-qwen3");
  EXPECT_EQ(slot_names(c, 1), (std::vector<std::string>{
                                  "model.layers.1.input_layernorm.weight",
                                  "model.layers.1.self_attn.q_proj.weight",
                                  "model.layers.1.self_attn.k_proj.weight",
                                  "model.layers.1.self_attn.v_proj.weight",
                                  "model.layers.1.self_attn.o_proj.weight",
                                  "model.layers.1.self_attn.q_norm.weight",
                                  "model.layers.1.self_attn.k_norm.weight",
                                  "model.layers.1.post_attention_layernorm.weight",
                                  "model.layers.1.mlp.gate_proj.weight",
                                  "model.layers.1.mlp.up_proj.weight",
                                  "model.layers.1.mlp.down_proj.weight",
                              }));
  EXPECT_EQ(slot_names(c, -1), (std::vector<std::string>{"model.embed_tokens.weight",
                                                         "model.norm.weight", "lm_head.weight"}));
  EXPECT_EQ(tensor_name(c, TensorRole::kMixerNorm, 2), "model.layers.2.input_layernorm.weight");
  EXPECT_EQ(tensor_name(c, TensorRole::kAttnOut, 0), "model.layers.0.self_attn.o_proj.weight");
}

TEST(TensorRoles, Lfm2MoeLayerOrderAndNames) {
  // tiny-lfm2moe: layer 0 conv + dense, 1 attention + MoE, 2 conv + MoE; 8 experts.
  ModelConfig c = preset_config("tiny-lfm2moe");
  EXPECT_EQ(slot_names(c, 0), (std::vector<std::string>{
                                  "model.layers.0.operator_norm.weight",
                                  "model.layers.0.conv.in_proj.weight",
                                  "model.layers.0.conv.conv.weight",
                                  "model.layers.0.conv.out_proj.weight",
                                  "model.layers.0.ffn_norm.weight",
                                  "model.layers.0.feed_forward.w1.weight",
                                  "model.layers.0.feed_forward.w3.weight",
                                  "model.layers.0.feed_forward.w2.weight",
                              }));
  std::vector<std::string> moe = slot_names(c, 1);
  ASSERT_EQ(moe.size(), 1u + 6u + 1u + 2u + 8u * 3u);
  EXPECT_EQ(moe[6], "model.layers.1.self_attn.k_layernorm.weight");
  EXPECT_EQ(moe[7], "model.layers.1.ffn_norm.weight");
  EXPECT_EQ(moe[8], "model.layers.1.feed_forward.gate.weight");
  EXPECT_EQ(moe[9], "model.layers.1.feed_forward.expert_bias");
  // Expert by expert, w1 (gate), w3 (up), w2 (down) each.
  EXPECT_EQ(moe[10], "model.layers.1.feed_forward.experts.0.w1.weight");
  EXPECT_EQ(moe[11], "model.layers.1.feed_forward.experts.0.w3.weight");
  EXPECT_EQ(moe[12], "model.layers.1.feed_forward.experts.0.w2.weight");
  EXPECT_EQ(moe[13], "model.layers.1.feed_forward.experts.1.w1.weight");
  EXPECT_EQ(moe.back(), "model.layers.1.feed_forward.experts.7.w2.weight");
  EXPECT_EQ(slot_names(c, -1),
            (std::vector<std::string>{"model.embed_tokens.weight", "model.embedding_norm.weight"}));
  TensorSlot down = tensor_slot(c, TensorRole::kExpertDown, 2, 5);
  EXPECT_EQ(down.name, "model.layers.2.feed_forward.experts.5.w2.weight");
  EXPECT_EQ(down.shape, (Shape{64, 32}));
  EXPECT_EQ(tensor_slot(c, TensorRole::kConvKernel, 2).shape, (Shape{64, 1, 3}));
}

TEST(TensorRoles, AbsentRolesAreRefusedByName) {
  ModelConfig moe = preset_config("tiny-lfm2moe");
  EXPECT_FALSE(has_tensor(moe, TensorRole::kRouter, 0));  // the dense layer
  EXPECT_FALSE(has_tensor(moe, TensorRole::kAttnQ, 0));   // a conv layer
  EXPECT_FALSE(has_tensor(moe, TensorRole::kConvInProjBias, 0));
  EXPECT_FALSE(has_tensor(moe, TensorRole::kLmHead));  // tied
  try {
    tensor_slot(moe, TensorRole::kAttnQ, 0);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("attn_q"), std::string::npos) << e.what();
  }
  ModelConfig qwen = preset_config("tiny-qwen3");
  EXPECT_FALSE(has_tensor(qwen, TensorRole::kConvKernel, 0));  // no such row at all
  EXPECT_THROW(tensor_slot(qwen, TensorRole::kRouter, 0), Error);
  EXPECT_THROW(tensor_slot(qwen, TensorRole::kAttnQ), Error);  // a layer row without a layer
}

TEST(TensorRoles, PatternsMatchWholeNamesWithNumbers) {
  const char* p = "model.layers.{i}.feed_forward.experts.{e}.w1.weight";
  EXPECT_TRUE(tensor_pattern_matches(p, "model.layers.12.feed_forward.experts.0.w1.weight"));
  EXPECT_FALSE(tensor_pattern_matches(p, "model.layers.x.feed_forward.experts.0.w1.weight"));
  EXPECT_FALSE(tensor_pattern_matches(p, "model.layers..feed_forward.experts.0.w1.weight"));
  EXPECT_FALSE(tensor_pattern_matches(p, "model.layers.1.feed_forward.experts.0.w1.weight.x"));
  EXPECT_FALSE(tensor_pattern_matches(p, "xmodel.layers.1.feed_forward.experts.0.w1.weight"));
  EXPECT_EQ(expand_tensor_pattern(p, 3, 17), "model.layers.3.feed_forward.experts.17.w1.weight");
  EXPECT_EQ(expand_tensor_pattern("blk.{i}.ffn_up_exps.weight", 4, -1), "blk.4.ffn_up_exps.weight");
}

TEST(TensorRoles, RoutingRowsCarryTheRoutingPrecision) {
  EXPECT_EQ(tensor_precision("model.layers.3.feed_forward.gate.weight"), TensorPrecision::kRouting);
  EXPECT_EQ(tensor_precision("model.layers.3.feed_forward.expert_bias"),
            TensorPrecision::kRoutingStoredF32);
  EXPECT_EQ(tensor_precision("model.layers.3.feed_forward.w1.weight"), TensorPrecision::kByShape);
  EXPECT_EQ(tensor_precision("model.layers.3.mlp.gate_proj.weight"), TensorPrecision::kByShape);
  EXPECT_TRUE(tensor_has_role("model.layers.0.feed_forward.gate.weight", TensorRole::kRouter));
  EXPECT_FALSE(tensor_has_role("model.layers.0.feed_forward.w1.weight", TensorRole::kRouter));
}

}  // namespace
}  // namespace stoa
