// Registry entry: Qwen3 (dense). Field names and defaults follow transformers' Qwen3Config;
// tensor names follow modeling_qwen3.py's state dict.
#include <string>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "model/arch_registry.h"
#include "model/config_json.h"

namespace stoa {

namespace {

void parse_qwen3(const ConfigReader& r, ModelConfig* c) {
  c->vocab_size = r.require_size({"vocab_size"}, kMaxModelDim);
  c->hidden_size = r.require_size({"hidden_size"}, kMaxModelDim);
  c->intermediate_size = r.require_size({"intermediate_size"}, kMaxModelDim);
  c->num_layers = r.require_size({"num_hidden_layers"}, kMaxLayers);
  c->num_heads = r.require_size({"num_attention_heads"}, kMaxHeadCount);
  c->num_kv_heads = r.get_size({"num_key_value_heads"}, c->num_heads, kMaxHeadCount);
  if (r.has({"head_dim"})) {
    c->head_dim = r.require_size({"head_dim"}, kMaxHeadCount);
  } else {
    if (c->hidden_size % c->num_heads != 0) {
      r.field_error("head_dim", cat("absent, and hidden_size ", c->hidden_size,
                                    " is not a multiple of num_attention_heads ", c->num_heads));
    }
    c->head_dim = c->hidden_size / c->num_heads;
  }
  c->rms_norm_eps = r.get_double({"rms_norm_eps"}, 1e-6);
  c->rope_theta = r.get_rope_theta(10000.0);
  c->max_position_embeddings = r.get_int({"max_position_embeddings"}, 32768);
  c->tie_word_embeddings = r.get_bool({"tie_word_embeddings"}, false);
  c->bos_token_id = r.get_token_id("bos_token_id");
  c->eos_token_id = r.get_token_id("eos_token_id");
  c->pad_token_id = r.get_token_id("pad_token_id");

  // Variants no engine of ours implements are refused, not silently ignored.
  if (r.get_bool({"attention_bias"}, false)) {
    fail(ErrorKind::kUnsupported, r.source(), ": field 'attention_bias': true is not supported");
  }
  if (r.get_bool({"use_sliding_window"}, false)) {
    fail(ErrorKind::kUnsupported, r.source(),
         ": field 'use_sliding_window': true is not supported");
  }
  std::string act = r.get_string({"hidden_act"}, "silu");
  if (act != "silu") {
    fail(ErrorKind::kUnsupported, r.source(), ": field 'hidden_act': '", act,
         "' is not supported (only silu)");
  }
  c->layer_kinds.assign(static_cast<size_t>(c->num_layers), LayerKind::kAttention);
  if (auto types = r.get_string_list("layer_types")) {
    if (static_cast<int64_t>(types->size()) != c->num_layers) {
      r.field_error("layer_types", cat("has ", types->size(), " entries but num_hidden_layers is ",
                                       c->num_layers));
    }
    for (size_t i = 0; i < types->size(); ++i) {
      if ((*types)[i] != "full_attention") {
        fail(ErrorKind::kUnsupported, r.source(), ": field 'layer_types[", i, "]': '", (*types)[i],
             "' is not supported for qwen3 (only full_attention)");
      }
    }
  }
}

void qwen3_to_json(const ModelConfig& c, nlohmann::json* out) {
  nlohmann::json& j = *out;
  j["vocab_size"] = c.vocab_size;
  j["hidden_size"] = c.hidden_size;
  j["intermediate_size"] = c.intermediate_size;
  j["num_hidden_layers"] = c.num_layers;
  j["num_attention_heads"] = c.num_heads;
  j["num_key_value_heads"] = c.num_kv_heads;
  j["head_dim"] = c.head_dim;
  j["hidden_act"] = "silu";
  j["max_position_embeddings"] = c.max_position_embeddings;
  j["rms_norm_eps"] = c.rms_norm_eps;
  j["rope_theta"] = c.rope_theta;
  j["rope_scaling"] = nullptr;
  j["attention_bias"] = false;
  j["attention_dropout"] = 0.0;
  j["use_sliding_window"] = false;
  j["sliding_window"] = nullptr;
  j["max_window_layers"] = c.num_layers;
  j["tie_word_embeddings"] = c.tie_word_embeddings;
}

void validate_qwen3(const ModelConfig& c, const std::string& source) {
  for (size_t i = 0; i < c.layer_kinds.size(); ++i) {
    if (c.layer_kinds[i] != LayerKind::kAttention) {
      fail(ErrorKind::kBadFormat, source, ": qwen3 layer ", i, " is not an attention layer");
    }
  }
}

std::vector<TensorSpec> qwen3_tensors(const ModelConfig& c) {
  const int64_t h = c.hidden_size, q = c.num_heads * c.head_dim, kv = c.num_kv_heads * c.head_dim;
  std::vector<TensorSpec> out;
  out.push_back({"model.embed_tokens.weight", {c.vocab_size, h}});
  for (int64_t i = 0; i < c.num_layers; ++i) {
    std::string p = cat("model.layers.", i, ".");
    out.push_back({p + "input_layernorm.weight", {h}});
    out.push_back({p + "self_attn.q_proj.weight", {q, h}});
    out.push_back({p + "self_attn.k_proj.weight", {kv, h}});
    out.push_back({p + "self_attn.v_proj.weight", {kv, h}});
    out.push_back({p + "self_attn.o_proj.weight", {h, q}});
    out.push_back({p + "self_attn.q_norm.weight", {c.head_dim}});
    out.push_back({p + "self_attn.k_norm.weight", {c.head_dim}});
    out.push_back({p + "post_attention_layernorm.weight", {h}});
    out.push_back({p + "mlp.gate_proj.weight", {c.intermediate_size, h}});
    out.push_back({p + "mlp.up_proj.weight", {c.intermediate_size, h}});
    out.push_back({p + "mlp.down_proj.weight", {h, c.intermediate_size}});
  }
  out.push_back({"model.norm.weight", {h}});
  if (!c.tie_word_embeddings) out.push_back({"lm_head.weight", {c.vocab_size, h}});
  return out;
}

}  // namespace

const ArchInfo& qwen3_arch_info() {
  static const ArchInfo info{
      .arch = Arch::kQwen3,
      .name = "qwen3",
      .aliases = {},
      .hf_class = "Qwen3ForCausalLM",
      .parse = parse_qwen3,
      .to_json = qwen3_to_json,
      .validate = validate_qwen3,
      .tensors = qwen3_tensors,
      .tensor_suffix_aliases = {},
      .f32_tensor_suffixes = {},
  };
  return info;
}

}  // namespace stoa
