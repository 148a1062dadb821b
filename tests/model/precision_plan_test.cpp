// The precision plan over every preset's tensor list: the int8 grid holds the big matrices, the
// MoE routing inputs stay f32, everything else is bf16 — and each class really occurs where the
// architecture has it, so a renamed tensor cannot silently fall into the wrong carrier.
#include "model/precision_plan.h"

#include <gtest/gtest.h>

#include "core/int8_grid.h"
#include "model/presets.h"
#include "model/weights.h"

namespace stoa {
namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

TEST(PrecisionPlan, EveryPresetTensorGetsTheDocumentedCarrier) {
  for (const PresetInfo& preset : model_presets()) {
    ModelConfig c = preset_config(preset.name);
    size_t counts[3] = {0, 0, 0};
    size_t routers = 0, biases = 0;
    for (const TensorSpec& spec : expected_tensors(c)) {
      Carrier got = carrier_for(spec.name, spec.shape);
      ++counts[static_cast<int>(got)];
      if (ends_with(spec.name, ".feed_forward.gate.weight")) {
        ++routers;
        EXPECT_EQ(got, Carrier::kF32) << preset.name << ": " << spec.name;
        EXPECT_TRUE(is_moe_router(spec.name));
      } else if (ends_with(spec.name, ".expert_bias")) {
        ++biases;
        EXPECT_EQ(got, Carrier::kF32) << preset.name << ": " << spec.name;
      } else if (spec.shape.size() == 2 && spec.shape[1] % kInt8GroupSize == 0) {
        EXPECT_EQ(got, Carrier::kInt8Grid) << preset.name << ": " << spec.name;
      } else {
        EXPECT_EQ(got, Carrier::kBf16) << preset.name << ": " << spec.name;
      }
      if (ends_with(spec.name, "norm.weight") ||
          spec.name.find(".conv.conv.") != std::string::npos) {
        EXPECT_EQ(got, Carrier::kBf16) << preset.name << ": " << spec.name;
      }
    }
    // Every preset has matrices and norms; the f32 class is exactly the routers and biases.
    EXPECT_GT(counts[0], 0u) << preset.name;
    EXPECT_GT(counts[1], 0u) << preset.name;
    EXPECT_EQ(counts[2], routers + biases) << preset.name;
    EXPECT_EQ(routers > 0, c.num_experts > 0 && c.arch == Arch::kLfm2Moe) << preset.name;
  }
}

TEST(PrecisionPlan, ShapeEdgeCases) {
  EXPECT_EQ(carrier_for("x.weight", {64, 32}), Carrier::kInt8Grid);
  EXPECT_EQ(carrier_for("x.weight", {64, 48}), Carrier::kBf16);  // cols not a multiple of 32
  EXPECT_EQ(carrier_for("x.weight", {64}), Carrier::kBf16);
  EXPECT_EQ(carrier_for("x.weight", {4, 1, 32}), Carrier::kBf16);  // 3-D conv kernel
  EXPECT_EQ(carrier_for("x.weight", {4, 0}), Carrier::kBf16);
  EXPECT_EQ(carrier_for("model.layers.3.feed_forward.gate.weight", {8, 64}), Carrier::kF32);
  EXPECT_EQ(carrier_for("model.layers.3.feed_forward.expert_bias", {8}), Carrier::kF32);
  // The dense FFN's gate projection is w1, not the router.
  EXPECT_EQ(carrier_for("model.layers.3.feed_forward.w1.weight", {128, 64}), Carrier::kInt8Grid);
  EXPECT_STREQ(carrier_name(Carrier::kF32), "f32");
}

}  // namespace
}  // namespace stoa
