// The trainer's view of an architecture, torch-free: which tensor (by HF name, from the
// architecture's tensor-role table, model/tensor_roles.h) fills which slot of each layer of the
// policy's forward pass (train/policy_model.h). One file per architecture says which blocks its
// layers have (qwen3.cpp; lfm2.cpp for lfm2 and lfm2_moe); PolicyModel then binds the named
// tensors generically. Kept free of libtorch so an architecture file compiles in seconds.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "model/config.h"

namespace stoa::train {

// An empty name is an absent optional tensor (a conv bias, the routing bias).
struct PolicyLayerLayout {
  bool attention = false;  // else the LFM2 short conv
  bool moe = false;        // else a dense SwiGLU
  std::string mixer_norm, ffn_norm;
  std::string q, k, v, o, q_norm, k_norm;                                              // attention
  std::string conv_in, conv_in_bias, conv_kernel, conv_bias, conv_out, conv_out_bias;  // conv
  std::string gate, up, down;                                    // dense SwiGLU
  std::string router, expert_bias;                               // MoE
  std::vector<std::string> expert_gate, expert_up, expert_down;  // MoE experts
};

struct PolicyLayout {
  std::string embedding, final_norm;
  std::string lm_head;  // empty: tied to the embedding
  std::vector<PolicyLayerLayout> layers;
};

// The layout of config.arch (dispatches to the architecture files below).
PolicyLayout policy_layout(const ModelConfig& config);

// One per architecture (train/models/<arch>.cpp).
PolicyLayout qwen3_policy_layout(const ModelConfig& config);
PolicyLayout lfm2_policy_layout(const ModelConfig& config);  // lfm2 and lfm2_moe

// The blocks the architecture files compose, named from the role table.
PolicyLayout model_level_layout(const ModelConfig& config);  // embedding, final norm, head
void name_norms(const ModelConfig& config, int64_t layer, PolicyLayerLayout* out);
void name_attention(const ModelConfig& config, int64_t layer, PolicyLayerLayout* out);
void name_short_conv(const ModelConfig& config, int64_t layer, PolicyLayerLayout* out);
void name_dense_ffn(const ModelConfig& config, int64_t layer, PolicyLayerLayout* out);
void name_moe(const ModelConfig& config, int64_t layer, PolicyLayerLayout* out);

}  // namespace stoa::train
