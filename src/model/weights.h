// A model's weights in memory: f32 master tensors keyed by their Hugging Face names
// (e.g. "model.layers.0.self_attn.q_proj.weight"), plus the config they belong to.
// The tensor list of each architecture comes from the architecture registry (arch_registry.h).
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "model/config.h"

namespace stoa {

struct TensorSpec {
  std::string name;  // Hugging Face name
  Shape shape;
};

struct ModelWeights {
  ModelConfig config;
  std::map<std::string, Tensor> tensors;  // f32 unless loaded otherwise

  const Tensor& at(const std::string& name) const;  // throws kNotFound naming the tensor
  bool has(const std::string& name) const { return tensors.count(name) != 0; }
};

// Every tensor the config implies, in a stable order (HF names and shapes).
std::vector<TensorSpec> expected_tensors(const ModelConfig& config);

// Seeded random init at realistic scale: matrices N(0, std), norms 1, expert bias small
// non-zero values; identical for the same (config, seed) on every machine.
ModelWeights random_weights(const ModelConfig& config, uint64_t seed, float std = 0.02f);
// One tensor of that init, alone (the streaming writers make a model one tensor at a time with
// it): bit-identical to the same tensor of random_weights.
Tensor random_tensor(const TensorSpec& spec, uint64_t seed, float std = 0.02f);

// Hugging Face model directory: config.json + model.safetensors (+ tokenizer files, untouched).
// Loading converts every float tensor to f32 and checks names and shapes against the config.
// A directory with model.gguf (Q8_0) instead of safetensors is the int8-sized form
// (`stoa model init --dtype q8_0`): it loads through import_gguf.
ModelWeights load_model_dir(const std::string& dir);
void save_model_dir(const ModelWeights& weights, const std::string& dir, DType dtype = DType::kF32);
// Streamed: one tensor is asked of `source`, converted and written before the next (at most one
// f32 tensor alive); `observe` sees each tensor's f32 values (in file order) before conversion.
class TensorSource;
using TensorObserver = std::function<void(const TensorSpec&, const Tensor& f32)>;
void save_model_dir(const TensorSource& source, const std::string& dir, DType dtype,
                    const TensorObserver& observe = {});
// config.json alone (written atomically), e.g. beside an int8 model.gguf.
void write_model_dir_config(const ModelConfig& config, const std::string& dir,
                            const std::string& torch_dtype);
// The weights file of an int8-sized model directory.
inline constexpr const char* kModelGgufName = "model.gguf";

}  // namespace stoa
