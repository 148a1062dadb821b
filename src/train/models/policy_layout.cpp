#include "train/models/policy_layout.h"

#include "core/error.h"
#include "model/tensor_roles.h"

namespace stoa::train {

PolicyLayout policy_layout(const ModelConfig& config) {
  switch (config.arch) {
    case Arch::kQwen3:
      return qwen3_policy_layout(config);
    case Arch::kLfm2:
    case Arch::kLfm2Moe:
      return lfm2_policy_layout(config);
  }
  fail(ErrorKind::kUnsupported, "the trainer has no architecture ", static_cast<int>(config.arch));
}

namespace {

// The name of an optional tensor, or "" when the table says this layer has none.
std::string optional_name(const ModelConfig& c, TensorRole role, int64_t layer) {
  return has_tensor(c, role, layer) ? tensor_name(c, role, layer) : std::string();
}

}  // namespace

PolicyLayout model_level_layout(const ModelConfig& c) {
  PolicyLayout out;
  out.embedding = tensor_name(c, TensorRole::kEmbedding);
  out.final_norm = tensor_name(c, TensorRole::kFinalNorm);
  if (!c.tie_word_embeddings) out.lm_head = tensor_name(c, TensorRole::kLmHead);
  return out;
}

void name_norms(const ModelConfig& c, int64_t layer, PolicyLayerLayout* out) {
  out->mixer_norm = tensor_name(c, TensorRole::kMixerNorm, layer);
  out->ffn_norm = tensor_name(c, TensorRole::kFfnNorm, layer);
}

void name_attention(const ModelConfig& c, int64_t layer, PolicyLayerLayout* out) {
  out->attention = true;
  out->q = tensor_name(c, TensorRole::kAttnQ, layer);
  out->k = tensor_name(c, TensorRole::kAttnK, layer);
  out->v = tensor_name(c, TensorRole::kAttnV, layer);
  out->o = tensor_name(c, TensorRole::kAttnOut, layer);
  out->q_norm = tensor_name(c, TensorRole::kAttnQNorm, layer);
  out->k_norm = tensor_name(c, TensorRole::kAttnKNorm, layer);
}

void name_short_conv(const ModelConfig& c, int64_t layer, PolicyLayerLayout* out) {
  out->attention = false;
  out->conv_in = tensor_name(c, TensorRole::kConvInProj, layer);
  out->conv_in_bias = optional_name(c, TensorRole::kConvInProjBias, layer);
  out->conv_kernel = tensor_name(c, TensorRole::kConvKernel, layer);
  out->conv_bias = optional_name(c, TensorRole::kConvKernelBias, layer);
  out->conv_out = tensor_name(c, TensorRole::kConvOutProj, layer);
  out->conv_out_bias = optional_name(c, TensorRole::kConvOutProjBias, layer);
}

void name_dense_ffn(const ModelConfig& c, int64_t layer, PolicyLayerLayout* out) {
  out->moe = false;
  out->gate = tensor_name(c, TensorRole::kFfnGate, layer);
  out->up = tensor_name(c, TensorRole::kFfnUp, layer);
  out->down = tensor_name(c, TensorRole::kFfnDown, layer);
}

void name_moe(const ModelConfig& c, int64_t layer, PolicyLayerLayout* out) {
  out->moe = true;
  out->router = tensor_name(c, TensorRole::kRouter, layer);
  out->expert_bias = optional_name(c, TensorRole::kExpertBias, layer);
  for (int64_t e = 0; e < c.num_experts; ++e) {
    out->expert_gate.push_back(tensor_name(c, TensorRole::kExpertGate, layer, e));
    out->expert_up.push_back(tensor_name(c, TensorRole::kExpertUp, layer, e));
    out->expert_down.push_back(tensor_name(c, TensorRole::kExpertDown, layer, e));
  }
}

}  // namespace stoa::train
