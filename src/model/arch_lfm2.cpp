// Registry entries: LFM2 (hybrid short-conv + attention) and LFM2-MoE, in one file because
// LFM2-MoE is LFM2 plus MoE feed-forwards: same config fields and layers, one table with extra
// rows. Field names, legacy spellings and defaults follow transformers' Lfm2Config /
// Lfm2MoeConfig; the tensor-role table is lfm2_tensor_roles below.
#include <cmath>
#include <string>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "model/arch_registry.h"
#include "model/config_json.h"

namespace stoa {

namespace {

// LFM2's dense FFN width. HF's Lfm2MLP shrinks the configured width to 2/3 (SwiGLU keeps the
// parameter count of a 2-matrix MLP), applies the multiplier, and rounds up to
// block_multiple_of — LFM2-350M's block_ff_dim 6656 becomes 4608. A null multiplier skips both
// the multiplier and the rounding, exactly as in HF.
int64_t lfm2_ffn_width(const ConfigReader& r) {
  int64_t width = r.has({"block_ff_dim"}) ? r.require_size({"block_ff_dim"}, kMaxModelDim)
                                          : r.require_size({"intermediate_size"}, kMaxModelDim);
  if (!r.get_bool({"block_auto_adjust_ff_dim"}, true)) return width;
  width = 2 * width / 3;
  bool multiplier_null = r.object().contains("block_ffn_dim_multiplier") &&
                         r.object()["block_ffn_dim_multiplier"].is_null();
  if (multiplier_null) return width;
  double multiplier = r.get_double({"block_ffn_dim_multiplier"}, 1.0);
  int64_t multiple = r.get_size({"block_multiple_of"}, 256, kMaxModelDim);
  if (!(multiplier > 0) || !std::isfinite(multiplier) || multiplier * width > kMaxModelDim) {
    r.field_error("block_ffn_dim_multiplier",
                  cat("gives an FFN width out of range (multiplier ", multiplier, ")"));
  }
  width = static_cast<int64_t>(multiplier * static_cast<double>(width));
  width = multiple * ((width + multiple - 1) / multiple);
  if (width <= 0) r.field_error("block_ffn_dim_multiplier", "gives an empty FFN");
  return width;
}

void parse_layer_kinds(const ConfigReader& r, ModelConfig* c) {
  c->layer_kinds.clear();
  if (auto types = r.get_string_list("layer_types")) {
    for (size_t i = 0; i < types->size(); ++i) {
      const std::string& type = (*types)[i];
      if (type == "full_attention") {
        c->layer_kinds.push_back(LayerKind::kAttention);
      } else if (type == "conv") {
        c->layer_kinds.push_back(LayerKind::kConv);
      } else {
        r.field_error(cat("layer_types[", i, "]"),
                      cat("unknown layer type '", type, "' (expected conv or full_attention)"));
      }
    }
    return;  // a length mismatch is reported by validate_model_config
  }
  // Legacy configs list the attention layers; HF's default (neither given) is all attention.
  c->layer_kinds.assign(static_cast<size_t>(c->num_layers), LayerKind::kAttention);
  if (auto idxs = r.get_int_list("full_attn_idxs")) {
    c->layer_kinds.assign(static_cast<size_t>(c->num_layers), LayerKind::kConv);
    for (size_t i = 0; i < idxs->size(); ++i) {
      int64_t layer = (*idxs)[i];
      if (layer < 0 || layer >= c->num_layers) {
        r.field_error(cat("full_attn_idxs[", i, "]"),
                      cat("layer ", layer, " is outside [0, ", c->num_layers, ")"));
      }
      c->layer_kinds[static_cast<size_t>(layer)] = LayerKind::kAttention;
    }
  }
}

void parse_common(const ConfigReader& r, ModelConfig* c) {
  c->vocab_size = r.require_size({"vocab_size"}, kMaxModelDim);
  c->hidden_size = r.require_size({"hidden_size", "block_dim"}, kMaxModelDim);
  c->num_layers = r.require_size({"num_hidden_layers"}, kMaxLayers);
  c->num_heads = r.require_size({"num_attention_heads", "num_heads"}, kMaxHeadCount);
  c->num_kv_heads = r.get_size({"num_key_value_heads"}, 8, kMaxHeadCount);
  if (r.has({"head_dim"})) {
    c->head_dim = r.require_size({"head_dim"}, kMaxHeadCount);
  } else {
    if (c->hidden_size % c->num_heads != 0) {
      r.field_error("num_attention_heads", cat("hidden_size ", c->hidden_size,
                                               " is not a multiple of ", c->num_heads, " heads"));
    }
    c->head_dim = c->hidden_size / c->num_heads;
  }
  c->rms_norm_eps = r.get_double({"norm_eps", "block_norm_eps"}, 1e-5);
  c->rope_theta = r.get_rope_theta(1e6);
  c->max_position_embeddings = r.get_int({"max_position_embeddings"}, 128000);
  // HF lets the original key `tie_embedding` override tie_word_embeddings.
  c->tie_word_embeddings = r.get_bool({"tie_embedding", "tie_word_embeddings"}, true);
  c->conv_kernel = r.get_size({"conv_L_cache"}, 3, kMaxConvKernel);
  c->conv_bias = r.get_bool({"conv_bias"}, false);
  c->bos_token_id = r.get_token_id("bos_token_id");
  c->eos_token_id = r.get_token_id("eos_token_id");
  c->pad_token_id = r.get_token_id("pad_token_id");
  parse_layer_kinds(r, c);
}

void parse_lfm2(const ConfigReader& r, ModelConfig* c) {
  parse_common(r, c);
  c->intermediate_size = lfm2_ffn_width(r);
}

void parse_lfm2_moe(const ConfigReader& r, ModelConfig* c) {
  parse_common(r, c);
  // Lfm2MoeMLP uses intermediate_size as is (no block_* adjustment).
  c->intermediate_size = r.require_size({"intermediate_size"}, kMaxModelDim);
  c->moe_intermediate_size = r.get_size({"moe_intermediate_size"}, 1792, kMaxModelDim);
  c->num_experts = r.get_size({"num_experts"}, 32, kMaxExperts);
  c->num_experts_per_tok = r.get_size({"num_experts_per_tok"}, 4, kMaxExperts);
  c->num_dense_layers = r.get_int({"num_dense_layers"}, 2);
  c->use_expert_bias = r.get_bool({"use_expert_bias"}, true);
  c->norm_topk_prob = r.get_bool({"norm_topk_prob"}, true);
  c->routed_scaling_factor = r.get_double({"routed_scaling_factor"}, 1.0);
}

void common_to_json(const ModelConfig& c, nlohmann::json& j) {
  j["vocab_size"] = c.vocab_size;
  j["hidden_size"] = c.hidden_size;
  j["num_hidden_layers"] = c.num_layers;
  j["num_attention_heads"] = c.num_heads;
  j["num_key_value_heads"] = c.num_kv_heads;
  // HF derives head_dim from hidden_size / heads unless the config sets it.
  if (c.head_dim * c.num_heads != c.hidden_size) j["head_dim"] = c.head_dim;
  j["norm_eps"] = c.rms_norm_eps;
  j["rope_theta"] = c.rope_theta;
  j["max_position_embeddings"] = c.max_position_embeddings;
  j["tie_word_embeddings"] = c.tie_word_embeddings;
  j["conv_L_cache"] = c.conv_kernel;
  j["conv_bias"] = c.conv_bias;
  nlohmann::json types = nlohmann::json::array();
  for (LayerKind kind : c.layer_kinds) {
    types.push_back(kind == LayerKind::kAttention ? "full_attention" : "conv");
  }
  j["layer_types"] = std::move(types);
}

void lfm2_to_json(const ModelConfig& c, nlohmann::json* out) {
  common_to_json(c, *out);
  // The width is written as the final one; turning the adjustment off keeps HF from shrinking
  // it again.
  (*out)["intermediate_size"] = c.intermediate_size;
  (*out)["block_auto_adjust_ff_dim"] = false;
  (*out)["block_multiple_of"] = 256;
  (*out)["block_ffn_dim_multiplier"] = 1.0;
}

void lfm2_moe_to_json(const ModelConfig& c, nlohmann::json* out) {
  common_to_json(c, *out);
  nlohmann::json& j = *out;
  j["intermediate_size"] = c.intermediate_size;
  j["moe_intermediate_size"] = c.moe_intermediate_size;
  j["num_experts"] = c.num_experts;
  j["num_experts_per_tok"] = c.num_experts_per_tok;
  j["num_dense_layers"] = c.num_dense_layers;
  j["use_expert_bias"] = c.use_expert_bias;
  j["norm_topk_prob"] = c.norm_topk_prob;
  j["routed_scaling_factor"] = c.routed_scaling_factor;
}

void validate_lfm2(const ModelConfig& c, const std::string& source) {
  if (c.conv_kernel < 1 || c.conv_kernel > kMaxConvKernel) {
    fail(ErrorKind::kBadFormat, source, ": conv_L_cache must be in [1, ", kMaxConvKernel, "], got ",
         c.conv_kernel);
  }
}

void validate_lfm2_moe(const ModelConfig& c, const std::string& source) {
  validate_lfm2(c, source);
  if (c.num_experts < 1 || c.num_experts > kMaxExperts) {
    fail(ErrorKind::kBadFormat, source, ": num_experts must be in [1, ", kMaxExperts, "], got ",
         c.num_experts);
  }
  if (c.num_experts_per_tok < 1 || c.num_experts_per_tok > c.num_experts) {
    fail(ErrorKind::kBadFormat, source,
         ": num_experts_per_tok must be in [1, num_experts = ", c.num_experts, "], got ",
         c.num_experts_per_tok);
  }
  if (c.num_dense_layers < 0 || c.num_dense_layers > c.num_layers) {
    fail(ErrorKind::kBadFormat, source,
         ": num_dense_layers must be in [0, num_hidden_layers = ", c.num_layers, "], got ",
         c.num_dense_layers);
  }
  if (c.moe_intermediate_size < 1 || c.moe_intermediate_size > kMaxModelDim) {
    fail(ErrorKind::kBadFormat, source, ": moe_intermediate_size must be in [1, ", kMaxModelDim,
         "], got ", c.moe_intermediate_size);
  }
  if (!(c.routed_scaling_factor > 0) || !std::isfinite(c.routed_scaling_factor)) {
    fail(ErrorKind::kBadFormat, source, ": routed_scaling_factor must be positive and finite, got ",
         c.routed_scaling_factor);
  }
}

// LFM2's tensors: HF names from modeling_lfm2.py and the LFM2-8B-A1B checkpoint (per-expert
// w1/w3/w2, not transformers 5's fused 3-D experts), GGUF names from llama.cpp's LLM_ARCH_LFM2 /
// LLM_ARCH_LFM2MOE. llama.cpp names the final norm `token_embd_norm` (its historical name for
// it) and has no conv biases. LFM2-MoE adds the MoE rows; its first num_dense_layers stay dense.
std::vector<TensorRoleRow> lfm2_tensor_roles(bool moe) {
  using R = TensorRole;
  using P = TensorPresence;
  using D = Dim;
  std::vector<TensorRoleRow> rows = {
      {R::kEmbedding, "model.embed_tokens.weight", "token_embd.weight", P::kAlways,
       dims(D::kVocab, D::kHidden)},
      {R::kMixerNorm, "model.layers.{i}.operator_norm.weight", "blk.{i}.attn_norm.weight",
       P::kAlways, dims(D::kHidden)},
      {R::kAttnQ, "model.layers.{i}.self_attn.q_proj.weight", "blk.{i}.attn_q.weight",
       P::kAttentionLayer, dims(D::kQueryWidth, D::kHidden)},
      {R::kAttnK, "model.layers.{i}.self_attn.k_proj.weight", "blk.{i}.attn_k.weight",
       P::kAttentionLayer, dims(D::kKvWidth, D::kHidden)},
      {R::kAttnV, "model.layers.{i}.self_attn.v_proj.weight", "blk.{i}.attn_v.weight",
       P::kAttentionLayer, dims(D::kKvWidth, D::kHidden)},
      {R::kAttnOut, "model.layers.{i}.self_attn.out_proj.weight", "blk.{i}.attn_output.weight",
       P::kAttentionLayer, dims(D::kHidden, D::kQueryWidth)},
      {R::kAttnQNorm, "model.layers.{i}.self_attn.q_layernorm.weight", "blk.{i}.attn_q_norm.weight",
       P::kAttentionLayer, dims(D::kHeadDim)},
      {R::kAttnKNorm, "model.layers.{i}.self_attn.k_layernorm.weight", "blk.{i}.attn_k_norm.weight",
       P::kAttentionLayer, dims(D::kHeadDim)},
      // in_proj's 3H rows are B, C, x in that order; the kernel is depthwise [H, 1, L].
      {R::kConvInProj, "model.layers.{i}.conv.in_proj.weight", "blk.{i}.shortconv.in_proj.weight",
       P::kConvLayer, dims(D::kConvInWidth, D::kHidden)},
      {R::kConvInProjBias, "model.layers.{i}.conv.in_proj.bias", nullptr, P::kConvLayerWithBias,
       dims(D::kConvInWidth)},
      {R::kConvKernel, "model.layers.{i}.conv.conv.weight", "blk.{i}.shortconv.conv.weight",
       P::kConvLayer, dims(D::kHidden, D::kOne, D::kConvKernel)},
      {R::kConvKernelBias, "model.layers.{i}.conv.conv.bias", nullptr, P::kConvLayerWithBias,
       dims(D::kHidden)},
      {R::kConvOutProj, "model.layers.{i}.conv.out_proj.weight",
       "blk.{i}.shortconv.out_proj.weight", P::kConvLayer, dims(D::kHidden, D::kHidden)},
      {R::kConvOutProjBias, "model.layers.{i}.conv.out_proj.bias", nullptr, P::kConvLayerWithBias,
       dims(D::kHidden)},
      {R::kFfnNorm, "model.layers.{i}.ffn_norm.weight", "blk.{i}.ffn_norm.weight", P::kAlways,
       dims(D::kHidden)},
  };
  if (moe) {
    std::vector<TensorRoleRow> moe_rows = {
        {R::kRouter, "model.layers.{i}.feed_forward.gate.weight", "blk.{i}.ffn_gate_inp.weight",
         P::kMoeLayer, dims(D::kExperts, D::kHidden), TensorPrecision::kRouting},
        {R::kExpertBias, "model.layers.{i}.feed_forward.expert_bias", "blk.{i}.exp_probs_b.bias",
         P::kMoeLayerWithExpertBias, dims(D::kExperts), TensorPrecision::kRoutingStoredF32},
        {R::kExpertGate, "model.layers.{i}.feed_forward.experts.{e}.w1.weight",
         "blk.{i}.ffn_gate_exps.weight", P::kMoeLayer, dims(D::kExpertFfn, D::kHidden)},
        {R::kExpertUp, "model.layers.{i}.feed_forward.experts.{e}.w3.weight",
         "blk.{i}.ffn_up_exps.weight", P::kMoeLayer, dims(D::kExpertFfn, D::kHidden)},
        {R::kExpertDown, "model.layers.{i}.feed_forward.experts.{e}.w2.weight",
         "blk.{i}.ffn_down_exps.weight", P::kMoeLayer, dims(D::kHidden, D::kExpertFfn)},
    };
    rows.insert(rows.end(), moe_rows.begin(), moe_rows.end());
  }
  std::vector<TensorRoleRow> tail = {
      {R::kFfnGate, "model.layers.{i}.feed_forward.w1.weight", "blk.{i}.ffn_gate.weight",
       P::kDenseFfnLayer, dims(D::kFfn, D::kHidden)},
      {R::kFfnUp, "model.layers.{i}.feed_forward.w3.weight", "blk.{i}.ffn_up.weight",
       P::kDenseFfnLayer, dims(D::kFfn, D::kHidden)},
      {R::kFfnDown, "model.layers.{i}.feed_forward.w2.weight", "blk.{i}.ffn_down.weight",
       P::kDenseFfnLayer, dims(D::kHidden, D::kFfn)},
      {R::kFinalNorm, "model.embedding_norm.weight", "token_embd_norm.weight", P::kAlways,
       dims(D::kHidden)},
      {R::kLmHead, "lm_head.weight", "output.weight", P::kUntiedHead, dims(D::kVocab, D::kHidden)},
  };
  rows.insert(rows.end(), tail.begin(), tail.end());
  return rows;
}

}  // namespace

const ArchInfo& lfm2_arch_info() {
  static const ArchInfo info{
      .arch = Arch::kLfm2,
      .name = "lfm2",
      .aliases = {},
      .hf_class = "Lfm2ForCausalLM",
      .gguf_name = "lfm2",
      .parse = parse_lfm2,
      .to_json = lfm2_to_json,
      .validate = validate_lfm2,
      .tensor_roles = lfm2_tensor_roles(/*moe=*/false),
      .tensor_suffix_aliases = {},
  };
  return info;
}

const ArchInfo& lfm2_moe_arch_info() {
  static const ArchInfo info{
      .arch = Arch::kLfm2Moe,
      .name = "lfm2_moe",
      .aliases = {"lfm2moe"},
      .hf_class = "Lfm2MoeForCausalLM",
      .gguf_name = "lfm2moe",
      .parse = parse_lfm2_moe,
      .to_json = lfm2_moe_to_json,
      .validate = validate_lfm2_moe,
      .tensor_roles = lfm2_tensor_roles(/*moe=*/true),
      // LFM2.5 checkpoints spell the routing bias with a ".weight" suffix.
      .tensor_suffix_aliases = {{".feed_forward.expert_bias.weight", ".feed_forward.expert_bias"}},
  };
  return info;
}

}  // namespace stoa
