// The expected tensor lists (HF names and shapes) and the seeded random init.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <set>

#include "core/hash.h"
#include "model/arch_registry.h"
#include "model/presets.h"
#include "model/weights.h"

namespace stoa {
namespace {

std::map<std::string, Shape> spec_map(const ModelConfig& c) {
  std::map<std::string, Shape> out;
  for (const TensorSpec& s : expected_tensors(c)) {
    EXPECT_TRUE(out.emplace(s.name, s.shape).second) << "duplicate " << s.name;
  }
  return out;
}

Hash128 state_hash(const ModelWeights& w) {
  StateHasher h;
  for (const auto& [name, t] : w.tensors) h.add(name, t.view());
  return h.finish();
}

TEST(ExpectedTensors, Qwen3NamesAndShapes) {
  ModelConfig c = preset_config("tiny-qwen3");  // H 96, 4 q / 2 kv heads of 16, F 192, untied
  auto specs = spec_map(c);
  EXPECT_EQ(specs.size(), 2u + 11u * 3u + 1u);
  EXPECT_EQ(specs.at("model.embed_tokens.weight"), (Shape{512, 96}));
  EXPECT_EQ(specs.at("model.layers.2.self_attn.q_proj.weight"), (Shape{64, 96}));
  EXPECT_EQ(specs.at("model.layers.2.self_attn.k_proj.weight"), (Shape{32, 96}));
  EXPECT_EQ(specs.at("model.layers.2.self_attn.v_proj.weight"), (Shape{32, 96}));
  EXPECT_EQ(specs.at("model.layers.2.self_attn.o_proj.weight"), (Shape{96, 64}));
  EXPECT_EQ(specs.at("model.layers.0.self_attn.q_norm.weight"), (Shape{16}));
  EXPECT_EQ(specs.at("model.layers.0.self_attn.k_norm.weight"), (Shape{16}));
  EXPECT_EQ(specs.at("model.layers.0.input_layernorm.weight"), (Shape{96}));
  EXPECT_EQ(specs.at("model.layers.0.post_attention_layernorm.weight"), (Shape{96}));
  EXPECT_EQ(specs.at("model.layers.1.mlp.gate_proj.weight"), (Shape{192, 96}));
  EXPECT_EQ(specs.at("model.layers.1.mlp.up_proj.weight"), (Shape{192, 96}));
  EXPECT_EQ(specs.at("model.layers.1.mlp.down_proj.weight"), (Shape{96, 192}));
  EXPECT_EQ(specs.at("model.norm.weight"), (Shape{96}));
  EXPECT_EQ(specs.at("lm_head.weight"), (Shape{512, 96}));
  c.tie_word_embeddings = true;
  EXPECT_EQ(spec_map(c).count("lm_head.weight"), 0u);
}

TEST(ExpectedTensors, Lfm2ConvAndAttentionLayers) {
  ModelConfig c = preset_config("tiny-lfm2");  // conv at 0,1,3; attention at 2,4; H 64
  auto specs = spec_map(c);
  EXPECT_EQ(specs.at("model.layers.0.operator_norm.weight"), (Shape{64}));
  EXPECT_EQ(specs.at("model.layers.0.ffn_norm.weight"), (Shape{64}));
  EXPECT_EQ(specs.at("model.layers.0.conv.in_proj.weight"), (Shape{192, 64}));
  EXPECT_EQ(specs.at("model.layers.0.conv.conv.weight"), (Shape{64, 1, 3}));
  EXPECT_EQ(specs.at("model.layers.0.conv.out_proj.weight"), (Shape{64, 64}));
  EXPECT_EQ(specs.count("model.layers.0.self_attn.q_proj.weight"), 0u);
  EXPECT_EQ(specs.count("model.layers.0.conv.in_proj.bias"), 0u);
  EXPECT_EQ(specs.at("model.layers.2.self_attn.q_proj.weight"), (Shape{64, 64}));
  EXPECT_EQ(specs.at("model.layers.2.self_attn.k_proj.weight"), (Shape{32, 64}));
  EXPECT_EQ(specs.at("model.layers.2.self_attn.out_proj.weight"), (Shape{64, 64}));
  EXPECT_EQ(specs.at("model.layers.2.self_attn.q_layernorm.weight"), (Shape{16}));
  EXPECT_EQ(specs.at("model.layers.2.self_attn.k_layernorm.weight"), (Shape{16}));
  EXPECT_EQ(specs.count("model.layers.2.conv.in_proj.weight"), 0u);
  EXPECT_EQ(specs.at("model.layers.4.feed_forward.w1.weight"), (Shape{128, 64}));
  EXPECT_EQ(specs.at("model.layers.4.feed_forward.w3.weight"), (Shape{128, 64}));
  EXPECT_EQ(specs.at("model.layers.4.feed_forward.w2.weight"), (Shape{64, 128}));
  EXPECT_EQ(specs.at("model.embedding_norm.weight"), (Shape{64}));
  EXPECT_EQ(specs.count("lm_head.weight"), 0u);  // tied
  c.conv_bias = true;
  auto biased = spec_map(c);
  EXPECT_EQ(biased.at("model.layers.1.conv.in_proj.bias"), (Shape{192}));
  EXPECT_EQ(biased.at("model.layers.1.conv.conv.bias"), (Shape{64}));
  EXPECT_EQ(biased.at("model.layers.1.conv.out_proj.bias"), (Shape{64}));
}

TEST(ExpectedTensors, Lfm2MoeExperts) {
  ModelConfig c = preset_config("tiny-lfm2moe");  // layer 0 dense; 1..3 MoE; 8 experts of 32
  auto specs = spec_map(c);
  EXPECT_EQ(specs.at("model.layers.0.feed_forward.w1.weight"), (Shape{128, 64}));
  EXPECT_EQ(specs.count("model.layers.0.feed_forward.gate.weight"), 0u);
  EXPECT_EQ(specs.at("model.layers.1.feed_forward.gate.weight"), (Shape{8, 64}));
  EXPECT_EQ(specs.at("model.layers.1.feed_forward.expert_bias"), (Shape{8}));
  EXPECT_EQ(specs.at("model.layers.3.feed_forward.experts.7.w1.weight"), (Shape{32, 64}));
  EXPECT_EQ(specs.at("model.layers.3.feed_forward.experts.7.w3.weight"), (Shape{32, 64}));
  EXPECT_EQ(specs.at("model.layers.3.feed_forward.experts.7.w2.weight"), (Shape{64, 32}));
  EXPECT_EQ(specs.count("model.layers.1.feed_forward.w1.weight"), 0u);
  EXPECT_EQ(specs.count("model.layers.3.feed_forward.experts.8.w1.weight"), 0u);
  c.use_expert_bias = false;
  EXPECT_EQ(spec_map(c).count("model.layers.1.feed_forward.expert_bias"), 0u);
  EXPECT_TRUE(keeps_f32(c, "model.layers.1.feed_forward.expert_bias"));
  EXPECT_EQ(canonical_tensor_name(c, "model.layers.1.feed_forward.expert_bias.weight"),
            "model.layers.1.feed_forward.expert_bias");
}

TEST(RandomWeights, DeterministicAndSeeded) {
  ModelConfig c = preset_config("tiny-lfm2moe");
  ModelWeights a = random_weights(c, 7);
  ModelWeights b = random_weights(c, 7);
  ModelWeights other = random_weights(c, 8);
  EXPECT_EQ(state_hash(a), state_hash(b));
  EXPECT_NE(state_hash(a), state_hash(other));
  EXPECT_EQ(a.tensors.size(), expected_tensors(c).size());
}

// Frozen checksums: a change in the PRNG, the normal sampler, the per-tensor seeding or the
// init rules changes these — which would silently change every "seeded" model in the project.
TEST(RandomWeights, FrozenChecksums) {
  EXPECT_EQ(state_hash(random_weights(preset_config("tiny-qwen3"), 42)).hex(),
            "eabb904ba736d503c130fa2f869f727c");
  EXPECT_EQ(state_hash(random_weights(preset_config("tiny-lfm2"), 42)).hex(),
            "936504349415a041273eed2e89d5e0a7");
  EXPECT_EQ(state_hash(random_weights(preset_config("tiny-lfm2moe"), 42)).hex(),
            "b5132f59dc8e736de2ef1edb08ab4cba");
}

TEST(RandomWeights, ScaleAndInitRules) {
  ModelConfig c = preset_config("tiny-lfm2moe");
  ModelWeights w = random_weights(c, 1, 0.02f);
  for (const auto& [name, t] : w.tensors) {
    SCOPED_TRACE(name);
    const float* x = t.as<float>();
    int64_t n = t.numel();
    double sum = 0, sum2 = 0;
    for (int64_t i = 0; i < n; ++i) {
      sum += x[i];
      sum2 += double(x[i]) * x[i];
    }
    if (name.ends_with("expert_bias")) {
      for (int64_t i = 0; i < n; ++i) EXPECT_NE(x[i], 0.0f);
      EXPECT_LT(std::sqrt(sum2 / n), 0.2);
    } else if (t.rank() == 1) {
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(x[i], 1.0f);  // RMSNorm weights
    } else if (n >= 4096) {
      EXPECT_NEAR(sum / n, 0.0, 0.002);
      EXPECT_NEAR(std::sqrt(sum2 / n), 0.02, 0.002);
    }
  }
  // Two tensors of the same shape differ (each has its own stream).
  const Tensor& w1 = w.at("model.layers.2.feed_forward.experts.0.w1.weight");
  const Tensor& w3 = w.at("model.layers.2.feed_forward.experts.0.w3.weight");
  EXPECT_NE(hash_tensor(w1.view()), hash_tensor(w3.view()));
}

// The normal sampler and portable_log are tested with the generator (tests/core/rng_test.cpp).

TEST(ModelWeights, AtNamesTheMissingTensor) {
  ModelWeights w = random_weights(preset_config("tiny-qwen3"), 1);
  EXPECT_EQ(w.at("model.norm.weight").numel(), 96);
  try {
    w.at("model.nope.weight");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kNotFound);
    EXPECT_NE(std::string(e.what()).find("model.nope.weight"), std::string::npos);
  }
}

}  // namespace
}  // namespace stoa
