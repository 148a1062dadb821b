// Config parsing: real HF configs of each architecture (current and legacy LFM2 field names),
// round trips through model_config_to_json, and the parameter counts of the presets.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "model/arch_registry.h"
#include "model/config.h"
#include "model/presets.h"

namespace stoa {
namespace {

// LiquidAI/LFM2-350M's config.json as published (transformers 4.54 era).
const char* kLfm2_350m = R"({
  "architectures": ["Lfm2ForCausalLM"],
  "block_auto_adjust_ff_dim": true,
  "block_dim": 1024,
  "block_ff_dim": 6656,
  "block_ffn_dim_multiplier": 1.0,
  "block_mlp_init_scale": 1.0,
  "block_multiple_of": 256,
  "block_norm_eps": 1e-05,
  "block_out_init_scale": 1.0,
  "block_use_swiglu": true,
  "block_use_xavier_init": true,
  "bos_token_id": 1,
  "conv_L_cache": 3,
  "conv_bias": false,
  "conv_dim": 1024,
  "conv_dim_out": 1024,
  "conv_use_xavier_init": true,
  "eos_token_id": 7,
  "hidden_size": 1024,
  "initializer_range": 0.02,
  "intermediate_size": 6656,
  "layer_types": ["conv", "conv", "full_attention", "conv", "conv", "full_attention", "conv",
                  "conv", "full_attention", "conv", "full_attention", "conv", "full_attention",
                  "conv", "full_attention", "conv"],
  "max_position_embeddings": 128000,
  "model_type": "lfm2",
  "norm_eps": 1e-05,
  "num_attention_heads": 16,
  "num_heads": 16,
  "num_hidden_layers": 16,
  "num_key_value_heads": 8,
  "pad_token_id": 0,
  "rope_theta": 1000000.0,
  "torch_dtype": "bfloat16",
  "transformers_version": "4.54.0.dev0",
  "use_cache": true,
  "use_pos_enc": true,
  "vocab_size": 65536
})";

// The pre-transformers LFM2 spelling: block_dim, num_heads, full_attn_idxs, block_norm_eps,
// tie_embedding, theta.
const char* kLfm2Legacy = R"({
  "model_type": "lfm2",
  "vocab_size": 65536,
  "block_dim": 1024,
  "block_ff_dim": 6656,
  "block_multiple_of": 256,
  "block_ffn_dim_multiplier": 1.0,
  "block_auto_adjust_ff_dim": true,
  "block_norm_eps": 1e-05,
  "num_hidden_layers": 16,
  "num_heads": 16,
  "num_key_value_heads": 8,
  "full_attn_idxs": [2, 5, 8, 10, 12, 14],
  "conv_L_cache": 3,
  "theta": 1000000.0,
  "tie_embedding": true,
  "bos_token_id": 1,
  "eos_token_id": 7,
  "pad_token_id": 0
})";

// LiquidAI/LFM2-8B-A1B.
const char* kLfm2_8b_a1b = R"({
  "architectures": ["Lfm2MoeForCausalLM"],
  "model_type": "lfm2_moe",
  "vocab_size": 65536,
  "hidden_size": 2048,
  "intermediate_size": 7168,
  "moe_intermediate_size": 1792,
  "num_hidden_layers": 24,
  "num_attention_heads": 32,
  "num_key_value_heads": 8,
  "max_position_embeddings": 128000,
  "norm_eps": 1e-05,
  "conv_bias": false,
  "conv_L_cache": 3,
  "rope_theta": 1000000.0,
  "num_dense_layers": 2,
  "num_experts": 32,
  "num_experts_per_tok": 4,
  "norm_topk_prob": true,
  "use_expert_bias": true,
  "routed_scaling_factor": 1.0,
  "bos_token_id": 1,
  "eos_token_id": 7,
  "pad_token_id": 0,
  "tie_word_embeddings": true,
  "layer_types": ["conv", "conv", "full_attention", "conv", "conv", "conv", "full_attention",
                  "conv", "conv", "conv", "full_attention", "conv", "conv", "conv",
                  "full_attention", "conv", "conv", "conv", "full_attention", "conv", "conv",
                  "full_attention", "conv", "conv"]
})";

// Qwen/Qwen3-0.6B.
const char* kQwen3_06b = R"({
  "architectures": ["Qwen3ForCausalLM"],
  "attention_bias": false,
  "attention_dropout": 0.0,
  "bos_token_id": 151643,
  "eos_token_id": 151645,
  "head_dim": 128,
  "hidden_act": "silu",
  "hidden_size": 1024,
  "initializer_range": 0.02,
  "intermediate_size": 3072,
  "max_position_embeddings": 40960,
  "max_window_layers": 28,
  "model_type": "qwen3",
  "num_attention_heads": 16,
  "num_hidden_layers": 28,
  "num_key_value_heads": 8,
  "rms_norm_eps": 1e-06,
  "rope_scaling": null,
  "rope_theta": 1000000,
  "sliding_window": null,
  "tie_word_embeddings": true,
  "torch_dtype": "bfloat16",
  "transformers_version": "4.51.0",
  "use_cache": true,
  "use_sliding_window": false,
  "vocab_size": 151936
})";

std::vector<int64_t> attention_layers(const ModelConfig& c) {
  std::vector<int64_t> out;
  for (int64_t i = 0; i < c.num_layers; ++i) {
    if (c.is_attention_layer(i)) out.push_back(i);
  }
  return out;
}

TEST(ModelConfig, Lfm2_350mRealConfig) {
  ModelConfig c = parse_model_config(kLfm2_350m, "LFM2-350M/config.json");
  EXPECT_EQ(c.arch, Arch::kLfm2);
  EXPECT_EQ(c.vocab_size, 65536);
  EXPECT_EQ(c.hidden_size, 1024);
  EXPECT_EQ(c.intermediate_size, 4608);  // int(2 * 6656 / 3) = 4437, rounded up to 256
  EXPECT_EQ(c.num_layers, 16);
  EXPECT_EQ(c.num_heads, 16);
  EXPECT_EQ(c.num_kv_heads, 8);
  EXPECT_EQ(c.head_dim, 64);
  EXPECT_DOUBLE_EQ(c.rms_norm_eps, 1e-5);
  EXPECT_DOUBLE_EQ(c.rope_theta, 1e6);
  EXPECT_EQ(c.conv_kernel, 3);
  EXPECT_FALSE(c.conv_bias);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_EQ(c.eos_token_id, 7);
  EXPECT_EQ(attention_layers(c), (std::vector<int64_t>{2, 5, 8, 10, 12, 14}));
  // The published size of LFM2-350M.
  EXPECT_EQ(count_parameters(c), 354483968);
  EXPECT_EQ(model_config_to_json(c), model_config_to_json(preset_config("lfm2-350m")));
}

TEST(ModelConfig, Lfm2LegacyNames) {
  ModelConfig legacy = parse_model_config(kLfm2Legacy, "legacy.json");
  ModelConfig current = parse_model_config(kLfm2_350m, "current.json");
  EXPECT_EQ(model_config_to_json(legacy), model_config_to_json(current));
}

TEST(ModelConfig, Lfm2FfnWidthRules) {
  auto width = [](const std::string& extra) {
    std::string text = R"({"model_type": "lfm2", "vocab_size": 64, "hidden_size": 64,
        "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2)" +
                       extra + "}";
    return parse_model_config(text, "t.json").intermediate_size;
  };
  EXPECT_EQ(width(R"(, "intermediate_size": 6656)"), 4608);  // HF defaults: adjust, 1.0, 256
  EXPECT_EQ(width(R"(, "intermediate_size": 300, "block_auto_adjust_ff_dim": false)"), 300);
  // block_ff_dim wins over intermediate_size, as in HF's Lfm2Config.
  EXPECT_EQ(width(R"(, "intermediate_size": 100, "block_ff_dim": 6656)"), 4608);
  // A null multiplier skips the multiplier and the rounding.
  EXPECT_EQ(width(R"(, "intermediate_size": 6656, "block_ffn_dim_multiplier": null)"), 4437);
  EXPECT_EQ(width(R"(, "intermediate_size": 96, "block_ffn_dim_multiplier": 1.5,
                     "block_multiple_of": 32)"),
            96);  // int(2*96/3)=64, *1.5=96, already a multiple of 32
}

TEST(ModelConfig, Lfm2MoeRealConfig) {
  ModelConfig c = parse_model_config(kLfm2_8b_a1b, "LFM2-8B-A1B/config.json");
  EXPECT_EQ(c.arch, Arch::kLfm2Moe);
  EXPECT_EQ(c.intermediate_size, 7168);  // no block_* adjustment for the MoE
  EXPECT_EQ(c.moe_intermediate_size, 1792);
  EXPECT_EQ(c.num_experts, 32);
  EXPECT_EQ(c.num_experts_per_tok, 4);
  EXPECT_EQ(c.num_dense_layers, 2);
  EXPECT_TRUE(c.use_expert_bias);
  EXPECT_TRUE(c.norm_topk_prob);
  EXPECT_EQ(attention_layers(c), (std::vector<int64_t>{2, 6, 10, 14, 18, 21}));
  EXPECT_FALSE(c.is_moe_layer(1));
  EXPECT_TRUE(c.is_moe_layer(2));
  EXPECT_EQ(model_config_to_json(c), model_config_to_json(preset_config("lfm2-8b-a1b")));
  // Liquid's model card: 8.3B total, 1.5B active.
  EXPECT_NEAR(count_parameters(c) / 1e9, 8.3, 0.1);
  EXPECT_NEAR(count_active_parameters(c) / 1e9, 1.5, 0.1);
}

TEST(ModelConfig, Qwen3RealConfig) {
  ModelConfig c = parse_model_config(kQwen3_06b, "Qwen3-0.6B/config.json");
  EXPECT_EQ(c.arch, Arch::kQwen3);
  EXPECT_EQ(c.head_dim, 128);  // explicit, not hidden / heads = 64
  EXPECT_EQ(c.num_kv_heads, 8);
  EXPECT_DOUBLE_EQ(c.rms_norm_eps, 1e-6);
  EXPECT_DOUBLE_EQ(c.rope_theta, 1e6);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_EQ(c.bos_token_id, 151643);
  EXPECT_EQ(c.eos_token_id, 151645);
  EXPECT_EQ(c.pad_token_id, -1);
  EXPECT_EQ(attention_layers(c).size(), 28u);
  EXPECT_EQ(model_config_to_json(c), model_config_to_json(preset_config("qwen3-0.6b")));
  EXPECT_EQ(count_parameters(c), 596049920);  // Qwen3-0.6B's published count
}

TEST(ModelConfig, Qwen3Defaults) {
  // HF defaults: kv heads = heads, head_dim = hidden / heads, untied, theta 10000.
  ModelConfig c = parse_model_config(
      R"({"model_type": "qwen3", "vocab_size": 100, "hidden_size": 64, "intermediate_size": 96,
          "num_hidden_layers": 2, "num_attention_heads": 4, "eos_token_id": [5, 6]})",
      "q.json");
  EXPECT_EQ(c.num_kv_heads, 4);
  EXPECT_EQ(c.head_dim, 16);
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_DOUBLE_EQ(c.rope_theta, 10000.0);
  EXPECT_EQ(c.eos_token_id, 5);  // the first of a list
  EXPECT_EQ(c.bos_token_id, -1);
}

TEST(ModelConfig, RopeParametersOfTransformers5) {
  ModelConfig c = parse_model_config(
      R"({"model_type": "qwen3", "vocab_size": 100, "hidden_size": 64, "intermediate_size": 96,
          "num_hidden_layers": 2, "num_attention_heads": 4,
          "rope_parameters": {"rope_type": "default", "rope_theta": 5000.0}})",
      "q.json");
  EXPECT_DOUBLE_EQ(c.rope_theta, 5000.0);
}

TEST(ModelConfig, EveryPresetRoundTripsThroughHfJson) {
  for (const PresetInfo& preset : model_presets()) {
    SCOPED_TRACE(preset.name);
    ModelConfig c = preset_config(preset.name);
    nlohmann::json j = model_config_to_json(c);
    EXPECT_EQ(j["model_type"], arch_name(c.arch));
    ModelConfig back = parse_model_config(j.dump(2), "roundtrip.json");
    EXPECT_EQ(model_config_to_json(back), j);
    EXPECT_EQ(back.intermediate_size, c.intermediate_size);
    EXPECT_EQ(back.layer_kinds, c.layer_kinds);
    EXPECT_EQ(back.head_dim, c.head_dim);
    EXPECT_EQ(back.tie_word_embeddings, c.tie_word_embeddings);
    EXPECT_EQ(back.num_experts, c.num_experts);
    EXPECT_EQ(back.use_expert_bias, c.use_expert_bias);
  }
}

TEST(ModelConfig, PresetsMeetTheirBriefs) {
  ModelConfig q = preset_config("tiny-qwen3");
  EXPECT_LT(q.num_kv_heads, q.num_heads);
  EXPECT_NE(q.head_dim * q.num_heads, q.hidden_size);  // exercises the explicit head_dim
  EXPECT_FALSE(q.tie_word_embeddings);                 // exercises lm_head

  ModelConfig l = preset_config("tiny-lfm2");
  EXPECT_GE(attention_layers(l).size(), 2u);
  EXPECT_GE(l.num_layers - static_cast<int64_t>(attention_layers(l).size()), 2);
  EXPECT_LT(l.num_kv_heads, l.num_heads);

  ModelConfig m = preset_config("tiny-lfm2moe");
  EXPECT_GE(m.num_experts, 4);
  EXPECT_EQ(m.num_experts_per_tok, 2);
  EXPECT_TRUE(m.use_expert_bias);
  EXPECT_GE(m.num_dense_layers, 1);
  int64_t moe_attention = 0, moe_conv = 0;
  for (int64_t i = 0; i < m.num_layers; ++i) {
    if (m.is_moe_layer(i)) (m.is_attention_layer(i) ? moe_attention : moe_conv)++;
  }
  EXPECT_GE(moe_attention + moe_conv, 2);
  EXPECT_GE(moe_attention, 1);
  EXPECT_GE(moe_conv, 1);

  EXPECT_GE(count_parameters(preset_config("bench-qwen3")), 100'000'000);
  ModelConfig b = preset_config("bench-lfm2moe");
  EXPECT_GE(b.num_experts, 8);
  EXPECT_GE(count_parameters(b), 300'000'000);
  int64_t demo = count_parameters(preset_config("demo"));
  EXPECT_GE(demo, 1'000'000);
  EXPECT_LE(demo, 20'000'000);

  for (const PresetInfo& preset : model_presets()) {
    SCOPED_TRACE(preset.name);
    ModelConfig c = preset_config(preset.name);
    EXPECT_EQ(c.hidden_size % 32, 0);
    EXPECT_EQ(c.intermediate_size % 32, 0);
    EXPECT_EQ(c.num_heads * c.head_dim % 32, 0);
    if (c.arch == Arch::kLfm2Moe) {
      EXPECT_EQ(c.moe_intermediate_size % 32, 0);
    }
  }
  EXPECT_THROW(preset_config("no-such-preset"), Error);
}

TEST(ModelConfig, ParameterCountsOfTinyPresetsByHand) {
  // tiny-qwen3: V=512 H=96 F=192, 3 layers, 4 q / 2 kv heads of 16, untied.
  int64_t h = 96, f = 192, q = 64, kv = 32, v = 512;
  int64_t layer = h + q * h + 2 * kv * h + h * q + 2 * 16 + h + 3 * f * h;
  EXPECT_EQ(count_parameters(preset_config("tiny-qwen3")), 2 * v * h + 3 * layer + h);

  // tiny-lfm2: V=512 H=64 F=128, conv at 0,1,3; attention (4 q / 2 kv of 16) at 2,4; tied.
  h = 64, f = 128;
  int64_t ffn = 2 * h + 3 * f * h;  // both norms and the SwiGLU
  int64_t conv = 3 * h * h + h * 3 + h * h;
  int64_t attn = 64 * h + 2 * 32 * h + h * 64 + 2 * 16;
  EXPECT_EQ(count_parameters(preset_config("tiny-lfm2")),
            v * h + 3 * conv + 2 * attn + 5 * ffn + h);

  // tiny-lfm2moe: 4 layers, attention at 1,3; layer 0 dense; 8 experts of 32, top-2.
  int64_t moe = 2 * h + 8 * h + 8 + 8 * 3 * 32 * h;
  int64_t total = v * h + 2 * conv + 2 * attn + ffn + 3 * moe + h;
  EXPECT_EQ(count_parameters(preset_config("tiny-lfm2moe")), total);
  EXPECT_EQ(count_active_parameters(preset_config("tiny-lfm2moe")), total - 3 * 6 * 3 * 32 * h);
}

TEST(ModelConfig, RegistryNamesAndAliases) {
  for (const ArchInfo* info : all_archs()) {
    EXPECT_EQ(find_arch(info->name), info);
    EXPECT_EQ(&arch_info(info->arch), info);
    EXPECT_STREQ(arch_name(info->arch), info->name);
  }
  EXPECT_EQ(find_arch("lfm2moe"), &lfm2_moe_arch_info());
  EXPECT_EQ(find_arch("llama"), nullptr);
}

}  // namespace
}  // namespace stoa
