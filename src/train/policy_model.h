// INTERNAL (includes libtorch; only src/train/ includes this). The policy network of all three
// architectures (qwen3, lfm2, lfm2_moe) as a functional libtorch forward over flat parameters
// keyed by their Hugging Face names — the same names ModelWeights and the safetensors files
// use, so loading, saving and optimiser state need no renaming.
//
// Math (reference.md §4, same as the engine): pre-norm residual blocks with RMSNorm; GQA
// attention with per-head RMSNorm on q and k before rotate-half RoPE and a causal mask; LFM2
// short-conv blocks (in_proj → B, C, x; depthwise causal conv of B⊙x; C⊙·; out_proj); SwiGLU
// FFNs; LFM2-MoE sigmoid routing (top-k by score + expert_bias, weights = the scores without the
// bias, normalised); final norm; tied or separate LM head.
#pragma once
#include <string>
#include <unordered_map>
#include <vector>

#include <torch/torch.h>

#include "model/weights.h"

namespace stoa::train {

class PolicyModel {
 public:
  // Copies `weights` (any float dtype; converted to f32) to `device` as leaf tensors that
  // require grad. `compute` is the matmul dtype (f32, or bf16/f16 for mixed precision).
  PolicyModel(const ModelWeights& weights, torch::Device device, torch::ScalarType compute);

  const ModelConfig& config() const { return config_; }
  torch::Device device() const { return device_; }

  // tokens: [B, T] int64, right-padded (padding only follows a row's real tokens, so causal
  // attention and the causal conv keep the real positions exact). Returns the final-normed
  // hidden states [B, T, H] in f32.
  torch::Tensor hidden(const torch::Tensor& tokens) const;
  // [..., H] -> [..., V] f32 logits.
  torch::Tensor logits(const torch::Tensor& hidden_states) const;

  const std::vector<std::string>& names() const { return names_; }  // expected_tensors order
  const std::vector<torch::Tensor>& parameters() const { return params_; }
  const torch::Tensor& parameter(const std::string& name) const;

  // f32 host copies / in-place loads (no autograd), by HF name.
  void copy_to(ModelWeights* out) const;
  void load(const ModelWeights& weights);

 private:
  struct Layer {
    bool attention = false;
    bool moe = false;
    torch::Tensor op_norm, ffn_norm;
    torch::Tensor q, k, v, o, q_norm, k_norm;                                         // attention
    torch::Tensor conv_in, conv_in_bias, conv_w, conv_bias, conv_out, conv_out_bias;  // conv
    torch::Tensor gate, up, down;                     // dense SwiGLU
    torch::Tensor router, expert_bias;                // MoE
    std::vector<torch::Tensor> e_gate, e_up, e_down;  // MoE experts
  };

  torch::Tensor linear(const torch::Tensor& x, const torch::Tensor& w) const;
  torch::Tensor rms_norm(const torch::Tensor& x, const torch::Tensor& w) const;
  torch::Tensor attention(const Layer& layer, const torch::Tensor& x, const torch::Tensor& cos,
                          const torch::Tensor& sin) const;
  torch::Tensor conv(const Layer& layer, const torch::Tensor& x) const;
  torch::Tensor swiglu(const torch::Tensor& x, const torch::Tensor& gate, const torch::Tensor& up,
                       const torch::Tensor& down) const;
  torch::Tensor moe(const Layer& layer, const torch::Tensor& x) const;
  const torch::Tensor& find(const std::string& name) const;
  torch::Tensor find_optional(const std::string& name) const;

  ModelConfig config_;
  torch::Device device_;
  torch::ScalarType compute_;
  std::vector<std::string> names_;
  std::vector<torch::Tensor> params_;
  std::unordered_map<std::string, size_t> index_;
  torch::Tensor embed_, final_norm_, lm_head_;
  std::vector<Layer> layers_;
};

torch::Tensor to_torch(const Tensor& tensor);    // host copy, f32 for float tensors
Tensor from_torch(const torch::Tensor& tensor);  // f32 host copy
torch::ScalarType torch_dtype(DType dtype);

}  // namespace stoa::train
