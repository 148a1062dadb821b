// Model configuration, normalised across architectures. Parsed from a Hugging Face config.json
// (HF field names, LFM2's legacy names too) and written back in the same form.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace stoa {

enum class Arch { kQwen3, kLfm2, kLfm2Moe };

enum class LayerKind { kAttention, kConv };

struct ModelConfig {
  Arch arch = Arch::kQwen3;
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;  // dense FFN width (LFM2: after block_auto_adjust_ff_dim)
  int64_t num_layers = 0;
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;  // explicit in Qwen3; hidden_size / num_heads otherwise
  double rms_norm_eps = 1e-6;
  double rope_theta = 1e6;
  int64_t max_position_embeddings = 4096;
  bool tie_word_embeddings = true;
  std::vector<LayerKind> layer_kinds;  // one per layer; all kAttention for Qwen3

  // LFM2 short convolution.
  int64_t conv_kernel = 3;  // conv_L_cache
  bool conv_bias = false;

  // LFM2-MoE.
  int64_t num_experts = 0;
  int64_t num_experts_per_tok = 0;
  int64_t num_dense_layers = 0;  // the first layers use a dense FFN
  int64_t moe_intermediate_size = 0;
  bool norm_topk_prob = true;
  bool use_expert_bias = true;
  double routed_scaling_factor = 1.0;

  int64_t bos_token_id = -1;
  int64_t eos_token_id = -1;
  int64_t pad_token_id = -1;

  // config.json's "stoa_tokenizer": "bytes": the model's tokens are bytes (ids 0..255) by
  // intent, with no tokenizer.json. A directory without a tokenizer that does not say so is
  // refused by every role that loads its codec (env/model_codec.h), since a forgotten tokenizer
  // would otherwise train on bytes without a word.
  bool byte_tokens = false;

  bool is_moe_layer(int64_t layer) const {
    return arch == Arch::kLfm2Moe && num_experts > 0 && layer >= num_dense_layers;
  }
  bool is_attention_layer(int64_t layer) const {
    return layer_kinds.at(static_cast<size_t>(layer)) == LayerKind::kAttention;
  }
};

const char* arch_name(Arch arch);  // "qwen3", "lfm2", "lfm2_moe" (HF model_type)

// Parses config.json text; `source` names the file in error messages. Throws stoa::Error
// (kBadFormat) naming the file and the field for malformed or inconsistent configs.
ModelConfig parse_model_config(const std::string& json_text, const std::string& source);
ModelConfig load_model_config(const std::string& path);
nlohmann::json model_config_to_json(const ModelConfig& config);
void validate_model_config(const ModelConfig& config, const std::string& source);

}  // namespace stoa
