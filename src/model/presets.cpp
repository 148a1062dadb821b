#include "model/presets.h"

#include "core/error.h"

namespace stoa {

namespace {

std::vector<LayerKind> kinds_with_attention_at(int64_t layers, std::vector<int64_t> attention) {
  std::vector<LayerKind> kinds(static_cast<size_t>(layers), LayerKind::kConv);
  for (int64_t i : attention) kinds.at(static_cast<size_t>(i)) = LayerKind::kAttention;
  return kinds;
}

// The fields both architectures' presets set alike; qwen3_config() and lfm2_config() add what
// differs.
ModelConfig base_config(Arch arch, int64_t vocab, int64_t hidden, int64_t ffn, int64_t layers,
                        int64_t heads, int64_t kv_heads, int64_t head_dim) {
  ModelConfig c;
  c.arch = arch;
  c.vocab_size = vocab;
  c.hidden_size = hidden;
  c.intermediate_size = ffn;
  c.num_layers = layers;
  c.num_heads = heads;
  c.num_kv_heads = kv_heads;
  c.head_dim = head_dim;
  c.rope_theta = 1e6;
  c.max_position_embeddings = 4096;
  c.bos_token_id = 1;
  c.eos_token_id = 2;
  c.pad_token_id = 0;
  return c;
}

struct Preset {
  PresetInfo info;
  ModelConfig (*make)();
};

const std::vector<Preset>& presets() {
  static const std::vector<Preset> list = {
      {{"tiny-qwen3",
        "Qwen3, 3 layers, GQA 4q/2kv, head_dim 16 != hidden/heads, untied head (oracle tests)"},
       [] { return qwen3_config(512, 96, 192, 3, 4, 2, 16, false); }},
      {{"tiny-lfm2", "LFM2, 5 layers: conv at 0,1,3, attention at 2,4; GQA 4q/2kv (oracle tests)"},
       [] {
         return lfm2_config(512, 64, 128, 5, 4, 2, {2, 4});
       }},
      {{"tiny-lfm2moe",
        "LFM2-MoE, 4 layers (1 dense + 3 MoE, conv and attention), 8 experts, top-2, expert bias"},
       [] {
         return lfm2_moe_config(lfm2_config(512, 64, 128, 4, 4, 2, {1, 3}), 8, 2, 1, 32);
       }},
      {{"bench-qwen3", "Qwen3, 14 layers, hidden 768, vocab 32768 (~113M parameters)"},
       [] { return qwen3_config(32768, 768, 2048, 14, 12, 4, 64, true); }},
      {{"bench-lfm2moe",
        "LFM2-MoE, 12 layers (2 dense, 10 MoE), hidden 1024, 16 experts top-4 (~350M total)"},
       [] {
         return lfm2_moe_config(lfm2_config(32768, 1024, 3072, 12, 16, 8, {2, 5, 8, 10}), 16, 4, 2,
                                512);
       }},
      // `stoa demo` trains from scratch on two shared CPU cores in minutes: the model must be
      // small enough for a few thousand SFT demonstrations, yet have three attention layers to
      // copy the question into the query and the answer out of the retrieved documents. The
      // vocabulary is a placeholder: the demo sets it from the tokenizer it trains.
      {{"demo", "LFM2, 6 layers, hidden 128, vocab 4096 (~1.7M parameters): the CPU demo model"},
       [] {
         return lfm2_config(4096, 128, 384, 6, 4, 2, {1, 3, 5});
       }},
      {{"demo-9m", "LFM2, 8 layers, hidden 256, vocab 8192 (~9M parameters): a larger demo model"},
       [] {
         return lfm2_config(8192, 256, 768, 8, 8, 4, {2, 5, 7});
       }},
      {{"lfm2-350m", "the shape of LiquidAI/LFM2-350M (reference; ~354M parameters)"},
       [] {
         ModelConfig c = lfm2_config(65536, 1024, 4608, 16, 16, 8, {2, 5, 8, 10, 12, 14});
         c.max_position_embeddings = 128000;
         c.eos_token_id = 7;
         return c;
       }},
      {{"lfm2-8b-a1b", "the shape of LiquidAI/LFM2-8B-A1B (reference; ~8.3B total, 1.5B active)"},
       [] {
         ModelConfig c = lfm2_moe_config(
             lfm2_config(65536, 2048, 7168, 24, 32, 8, {2, 6, 10, 14, 18, 21}), 32, 4, 2, 1792);
         c.max_position_embeddings = 128000;
         c.eos_token_id = 7;
         return c;
       }},
      {{"qwen3-0.6b", "the shape of Qwen/Qwen3-0.6B (reference)"},
       [] {
         ModelConfig c = qwen3_config(151936, 1024, 3072, 28, 16, 8, 128, true);
         c.max_position_embeddings = 40960;
         c.bos_token_id = 151643;
         c.eos_token_id = 151645;
         c.pad_token_id = -1;
         return c;
       }},
  };
  return list;
}

}  // namespace

ModelConfig qwen3_config(int64_t vocab, int64_t hidden, int64_t ffn, int64_t layers, int64_t heads,
                         int64_t kv_heads, int64_t head_dim, bool tied) {
  ModelConfig c = base_config(Arch::kQwen3, vocab, hidden, ffn, layers, heads, kv_heads, head_dim);
  c.rms_norm_eps = 1e-6;
  c.tie_word_embeddings = tied;
  c.layer_kinds.assign(static_cast<size_t>(layers), LayerKind::kAttention);
  return c;
}

ModelConfig lfm2_config(int64_t vocab, int64_t hidden, int64_t ffn, int64_t layers, int64_t heads,
                        int64_t kv_heads, std::vector<int64_t> attention) {
  ModelConfig c =
      base_config(Arch::kLfm2, vocab, hidden, ffn, layers, heads, kv_heads, hidden / heads);
  c.rms_norm_eps = 1e-5;
  c.tie_word_embeddings = true;
  c.layer_kinds = kinds_with_attention_at(layers, std::move(attention));
  c.conv_kernel = 3;
  c.conv_bias = false;
  return c;
}

ModelConfig lfm2_moe_config(ModelConfig c, int64_t experts, int64_t top_k, int64_t dense_layers,
                            int64_t expert_ffn) {
  c.arch = Arch::kLfm2Moe;
  c.num_experts = experts;
  c.num_experts_per_tok = top_k;
  c.num_dense_layers = dense_layers;
  c.moe_intermediate_size = expert_ffn;
  c.norm_topk_prob = true;
  c.use_expert_bias = true;
  c.routed_scaling_factor = 1.0;
  return c;
}

const std::vector<PresetInfo>& model_presets() {
  static const std::vector<PresetInfo> infos = [] {
    std::vector<PresetInfo> out;
    for (const Preset& p : presets()) out.push_back(p.info);
    return out;
  }();
  return infos;
}

ModelConfig preset_config(const std::string& name) {
  std::string known;
  for (const Preset& p : presets()) {
    if (p.info.name == name) {
      ModelConfig config = p.make();
      validate_model_config(config, "preset " + name);
      return config;
    }
    known += (known.empty() ? "" : ", ") + p.info.name;
  }
  fail(ErrorKind::kNotFound, "unknown model preset '", name, "' (known: ", known, ")");
}

}  // namespace stoa
