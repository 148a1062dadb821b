// INTERNAL (includes libtorch; only src/train/ includes this). The policy network of all three
// architectures (qwen3, lfm2, lfm2_moe) as a functional libtorch forward over flat parameters
// keyed by their Hugging Face names — the same names ModelWeights and the safetensors files
// use, so loading, saving and optimiser state need no renaming. The math is policy_math.h's.
#pragma once
#include <string>
#include <unordered_map>
#include <vector>

#include <torch/torch.h>

#include "core/hash.h"
#include "model/weights.h"
#include "train/lora.h"
#include "train/policy_math.h"

namespace stoa {
class TensorSource;  // model/tensor_source.h
}

namespace stoa::train {

class PolicyModel {
 public:
  // Copies `weights` (any float dtype; converted to f32) to `device` as leaf tensors that
  // require grad. `compute` is the matmul dtype (f32, or bf16/f16 for mixed precision).
  // With `lora` enabled (train/lora.h) every one of those tensors is frozen in lora.base_dtype
  // and the targets get adapters: A [rank, in] uniform in ±1/√in (PEFT's Kaiming init, drawn
  // from `seed`), B [out, rank] zero, both f32 and trained.
  PolicyModel(const ModelWeights& weights, torch::Device device, torch::ScalarType compute,
              const LoraOptions& lora = {}, uint64_t seed = 0);
  // The same, read from `source` one tensor at a time (no second whole copy).
  PolicyModel(const TensorSource& source, torch::Device device, torch::ScalarType compute,
              const LoraOptions& lora = {}, uint64_t seed = 0);

  const ModelConfig& config() const { return config_; }
  torch::Device device() const { return device_; }

  // tokens: [B, T] int64, right-padded (padding only follows a row's real tokens, so causal
  // attention and the causal conv keep the real positions exact). Returns the final-normed
  // hidden states [B, T, H] in f32.
  torch::Tensor hidden(const torch::Tensor& tokens) const;
  // [..., H] -> [..., V] f32 logits.
  torch::Tensor logits(const torch::Tensor& hidden_states) const;

  const std::vector<std::string>& names() const { return names_; }  // name order
  // The model's own tensors (with LoRA: the frozen base, in its dtype).
  const std::vector<torch::Tensor>& parameters() const { return params_; }
  const torch::Tensor& parameter(const std::string& name) const;
  // What the model computes with, f32 and without autograd: the parameter itself, or with LoRA
  // the merged W + scale·B·A of a target (one tensor made at a time: the publish path).
  torch::Tensor merged(const std::string& name) const;

  // LoRA: the adapters (A then B per target, targets in name order, PEFT's names); empty else.
  bool lora() const { return lora_.enabled(); }
  const LoraOptions& lora_options() const { return lora_; }
  const std::vector<std::string>& adapter_names() const { return adapter_names_; }
  const std::vector<torch::Tensor>& adapters() const { return adapters_; }
  // LoRA: sets the adapters to a PEFT adapter directory's (lora_options().init_adapter, at
  // construction), after check_peft_adapter and, for an adapter Stoa wrote of a base held in the
  // same dtype, the base's hash (kIntegrity: another base). lora_init.cpp.
  void load_peft_adapter(const std::string& dir);
  // The tensors' names, dtypes, shapes and bytes in name order (with LoRA: the frozen base's),
  // recomputed on every call: a LoRA checkpoint names the base it belongs to by it.
  Hash128 parameters_hash() const;

  // f32 host copies (merged) / in-place loads (no autograd), by HF name.
  void copy_to(ModelWeights* out) const;
  void load(const ModelWeights& weights);

 private:
  void add_parameter(const std::string& name, const Tensor& tensor);
  void bind();  // checks the config, binds the slots by role, marks the frozen tensors
  void add_adapters(uint64_t seed);  // LoRA: A and B per target, handed to the math

  ModelConfig config_;
  torch::Device device_;
  PolicyMath math_;
  std::vector<std::string> names_;
  std::vector<torch::Tensor> params_;
  std::unordered_map<std::string, size_t> index_;
  torch::Tensor embed_, final_norm_, lm_head_;
  std::vector<PolicyLayer> layers_;
  LoraOptions lora_;
  std::vector<std::string> adapter_names_;
  std::vector<torch::Tensor> adapters_;
  std::unordered_map<std::string, std::pair<size_t, size_t>> adapter_of_;  // weight -> A, B
};

torch::Tensor to_torch(const Tensor& tensor);    // host copy, f32 for float tensors
Tensor from_torch(const torch::Tensor& tensor);  // f32 host copy
torch::ScalarType torch_dtype(DType dtype);

}  // namespace stoa::train
