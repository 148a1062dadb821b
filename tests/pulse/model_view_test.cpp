// PULSE on real model layouts: every architecture's tensors get the precision plan's kind (LFM2's
// conv kernels and every norm are bf16, the MoE router and expert_bias f32), the fingerprint
// follows the config, and a model travels exactly.
#include <gtest/gtest.h>

#include "model/presets.h"
#include "model/weights.h"
#include "pulse/format.h"
#include "pulse/model_view.h"
#include "pulse/patch.h"

namespace stoa::pulse {
namespace {

TEST(PulseModelView, EveryArchitectureRoundTrips) {
  for (const char* preset : {"tiny-qwen3", "tiny-lfm2", "tiny-lfm2moe"}) {
    SCOPED_TRACE(preset);
    ModelConfig config = preset_config(preset);
    ModelWeights w = random_weights(config, 5);
    Int8Quantizer quant;
    Int8State v0 = int8_view_of(w, 0, &quant);
    EXPECT_EQ(v0.size(), w.tensors.size());
    for (const auto& [name, t] : v0.tensors())
      EXPECT_EQ(t.kind, tensor_kind_for(name, w.at(name).shape())) << name;
    Int8State back = decode_anchor(encode_anchor(v0));
    EXPECT_EQ(back.state_hash(), v0.state_hash());
    EXPECT_EQ(back.fingerprint(), v0.fingerprint());
    // A small update travels as a patch.
    for (auto& [name, t] : w.tensors)
      for (int64_t i = 0; i < t.numel(); i += 7) t.as<float>()[i] += 3e-4f;
    Int8State v1 = quant.quantize(weight_views(w), 1);
    Patch p = make_patch(v0, v1);
    apply_patch(back, decode_patch(encode_patch(p)));
    EXPECT_EQ(back.state_hash(), v1.state_hash());
  }
}

TEST(PulseModelView, FingerprintFollowsTheConfig) {
  ModelConfig a = preset_config("tiny-qwen3");
  ModelConfig b = a;
  b.rope_theta *= 2;  // same tensors, another model
  Int8Quantizer qa, qb;
  Int8State va = int8_view_of(random_weights(a, 1), 0, &qa);
  Int8State vb = int8_view_of(random_weights(b, 1), 0, &qb);
  EXPECT_NE(config_hash(a), config_hash(b));
  EXPECT_NE(va.fingerprint(), vb.fingerprint());
  Int8State other = vb;
  EXPECT_THROW(make_patch(va, vb), Error);
  vb.set_version(1);
  EXPECT_THROW(apply_patch(va, make_patch(other, vb)), Error);  // b's patch on a's weights
}

}  // namespace
}  // namespace stoa::pulse
