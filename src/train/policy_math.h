// INTERNAL (includes libtorch; only src/train/ includes this). The policy's math, apart from
// who holds the parameters: one block (pre-norm mixer + FFN), the embedding, the final norm and
// the head, each a function of tensors it is handed. PolicyModel binds its own f32 masters;
// the fully sharded trainer (fsdp.h) binds a block's parameters gathered just for that block.
//
// Math (reference.md §4, same as the engine): pre-norm residual blocks with RMSNorm; GQA
// attention with per-head RMSNorm on q and k before rotate-half RoPE and a causal mask; LFM2
// short-conv blocks (in_proj → B, C, x; depthwise causal conv of B⊙x; C⊙·; out_proj); SwiGLU
// FFNs; LFM2-MoE sigmoid routing (top-k by score + expert_bias, weights = the scores without the
// bias, normalised); final norm; tied or separate LM head.
#pragma once
#include <functional>
#include <string>
#include <unordered_map>
#include <vector>

#include <torch/torch.h>

#include "model/config.h"
#include "train/models/policy_layout.h"

namespace stoa::train {

// One layer's parameters, bound by role (train/models/policy_layout.h).
struct PolicyLayer {
  bool attention = false;
  bool moe = false;
  torch::Tensor op_norm, ffn_norm;
  torch::Tensor q, k, v, o, q_norm, k_norm;                                         // attention
  torch::Tensor conv_in, conv_in_bias, conv_w, conv_bias, conv_out, conv_out_bias;  // conv
  torch::Tensor gate, up, down;                                                     // dense SwiGLU
  torch::Tensor router, expert_bias;                                                // MoE
  std::vector<torch::Tensor> e_gate, e_up, e_down;                                  // MoE experts
};

// Binds a layer's slots to tensors by name (`pick` fails for a missing name; an empty optional
// name stays undefined) and checks the conv kernel's size.
PolicyLayer bind_policy_layer(const ModelConfig& config, const PolicyLayerLayout& names,
                              const std::function<torch::Tensor(const std::string&)>& pick);

// A LoRA adapter of one weight (train/lora.h): linear() adds scale·dropout(x)·Aᵀ·Bᵀ.
struct LoraAdapter {
  torch::Tensor a, b;  // [rank, in], [out, rank], f32, trained
  double scale = 1.0;
  double dropout = 0.0;  // only while autograd records (training steps)
};

class PolicyMath {
 public:
  PolicyMath(ModelConfig config, torch::Device device, torch::ScalarType compute);
  // The adapters, keyed by the storage of the weight they belong to: every product with that
  // weight (wherever a block is handed it) gets its adapter, and no slot of a layer changes.
  void set_adapters(std::unordered_map<const void*, LoraAdapter> adapters) {
    adapters_ = std::move(adapters);
  }

  const ModelConfig& config() const { return config_; }
  torch::Device device() const { return device_; }

  // RoPE tables [1, T, 1, head_dim/2] (undefined when no layer attends).
  std::pair<torch::Tensor, torch::Tensor> rope(int64_t T, bool any_attention) const;
  torch::Tensor embed(const torch::Tensor& table, const torch::Tensor& tokens) const;
  // x + mixer(norm(x)), then + ffn(norm(·)).
  torch::Tensor block(const PolicyLayer& layer, const torch::Tensor& x, const torch::Tensor& cos,
                      const torch::Tensor& sin) const;
  torch::Tensor rms_norm(const torch::Tensor& x, const torch::Tensor& w) const;
  torch::Tensor linear(const torch::Tensor& x, const torch::Tensor& w) const;

 private:
  torch::Tensor attention(const PolicyLayer& layer, const torch::Tensor& x,
                          const torch::Tensor& cos, const torch::Tensor& sin) const;
  torch::Tensor conv(const PolicyLayer& layer, const torch::Tensor& x) const;
  torch::Tensor swiglu(const torch::Tensor& x, const torch::Tensor& gate, const torch::Tensor& up,
                       const torch::Tensor& down) const;
  torch::Tensor moe(const PolicyLayer& layer, const torch::Tensor& x) const;

  ModelConfig config_;
  torch::Device device_;
  torch::ScalarType compute_;
  std::unordered_map<const void*, LoraAdapter> adapters_;
};

}  // namespace stoa::train
