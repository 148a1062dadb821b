// Registry entry: Qwen3 (dense). Field names and defaults follow transformers' Qwen3Config;
// the tensor-role table follows modeling_qwen3.py's state dict and llama.cpp's qwen3 names.
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

// Qwen3's tensors: HF names from modeling_qwen3.py, GGUF names from llama.cpp's LLM_ARCH_QWEN3.
// Every layer is attention + dense SwiGLU (validate_qwen3 refuses anything else).
std::vector<TensorRoleRow> qwen3_tensor_roles() {
  using R = TensorRole;
  using P = TensorPresence;
  using D = Dim;
  return {
      {R::kEmbedding, "model.embed_tokens.weight", "token_embd.weight", P::kAlways,
       dims(D::kVocab, D::kHidden)},
      {R::kMixerNorm, "model.layers.{i}.input_layernorm.weight", "blk.{i}.attn_norm.weight",
       P::kAlways, dims(D::kHidden)},
      {R::kAttnQ, "model.layers.{i}.self_attn.q_proj.weight", "blk.{i}.attn_q.weight", P::kAlways,
       dims(D::kQueryWidth, D::kHidden)},
      {R::kAttnK, "model.layers.{i}.self_attn.k_proj.weight", "blk.{i}.attn_k.weight", P::kAlways,
       dims(D::kKvWidth, D::kHidden)},
      {R::kAttnV, "model.layers.{i}.self_attn.v_proj.weight", "blk.{i}.attn_v.weight", P::kAlways,
       dims(D::kKvWidth, D::kHidden)},
      {R::kAttnOut, "model.layers.{i}.self_attn.o_proj.weight", "blk.{i}.attn_output.weight",
       P::kAlways, dims(D::kHidden, D::kQueryWidth)},
      {R::kAttnQNorm, "model.layers.{i}.self_attn.q_norm.weight", "blk.{i}.attn_q_norm.weight",
       P::kAlways, dims(D::kHeadDim)},
      {R::kAttnKNorm, "model.layers.{i}.self_attn.k_norm.weight", "blk.{i}.attn_k_norm.weight",
       P::kAlways, dims(D::kHeadDim)},
      {R::kFfnNorm, "model.layers.{i}.post_attention_layernorm.weight", "blk.{i}.ffn_norm.weight",
       P::kAlways, dims(D::kHidden)},
      {R::kFfnGate, "model.layers.{i}.mlp.gate_proj.weight", "blk.{i}.ffn_gate.weight", P::kAlways,
       dims(D::kFfn, D::kHidden)},
      {R::kFfnUp, "model.layers.{i}.mlp.up_proj.weight", "blk.{i}.ffn_up.weight", P::kAlways,
       dims(D::kFfn, D::kHidden)},
      {R::kFfnDown, "model.layers.{i}.mlp.down_proj.weight", "blk.{i}.ffn_down.weight", P::kAlways,
       dims(D::kHidden, D::kFfn)},
      {R::kFinalNorm, "model.norm.weight", "output_norm.weight", P::kAlways, dims(D::kHidden)},
      {R::kLmHead, "lm_head.weight", "output.weight", P::kUntiedHead, dims(D::kVocab, D::kHidden)},
  };
}

}  // namespace

const ArchInfo& qwen3_arch_info() {
  static const ArchInfo info{
      .arch = Arch::kQwen3,
      .name = "qwen3",
      .aliases = {},
      .hf_class = "Qwen3ForCausalLM",
      .gguf_name = "qwen3",
      .parse = parse_qwen3,
      .to_json = qwen3_to_json,
      .validate = validate_qwen3,
      .tensor_roles = qwen3_tensor_roles(),
      .tensor_suffix_aliases = {},
  };
  return info;
}

}  // namespace stoa
