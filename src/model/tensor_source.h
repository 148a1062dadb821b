// A model's tensors, one at a time: the input side of every streaming conversion (random init,
// a Hugging Face directory, a GGUF file, weights already in memory). Writers ask for one tensor,
// write it and drop it, so at most one tensor's wide (f32) copy is alive at a time — the 8B
// preset's f32 state (33 GB) never exists outside the trainer.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/int8_grid.h"
#include "core/tensor.h"
#include "model/safetensors.h"
#include "model/weights.h"

namespace stoa {

class TensorSource {
 public:
  virtual ~TensorSource() = default;
  const ModelConfig& config() const { return config_; }
  // Every tensor of the config, in expected_tensors order (HF names).
  const std::vector<TensorSpec>& specs() const { return specs_; }
  const TensorSpec& spec(const std::string& name) const;           // kNotFound naming the tensor
  const std::string& description() const { return description_; }  // for error messages

  // The tensor's values as a fresh f32 tensor of spec.shape (the one wide copy; drop it soon).
  virtual Tensor f32(const TensorSpec& spec) const = 0;
  // The tensor verbatim on the int8 grid when the source stores it so (a Q8_0 GGUF), else
  // nullopt: writers then pass the blocks through instead of re-quantizing.
  virtual std::optional<Int8Matrix> int8(const TensorSpec& spec) const;

 protected:
  TensorSource(ModelConfig config, std::string description);

 private:
  ModelConfig config_;
  std::vector<TensorSpec> specs_;
  std::string description_;
};

// Seeded random init (random_tensor): the same values as random_weights, made on demand.
class RandomTensorSource : public TensorSource {
 public:
  RandomTensorSource(const ModelConfig& config, uint64_t seed, float std = 0.02f);
  Tensor f32(const TensorSpec& spec) const override;

 private:
  uint64_t seed_;
  float std_;
};

// Weights already in memory (f32, bf16 or f16 tensors).
class WeightsTensorSource : public TensorSource {
 public:
  explicit WeightsTensorSource(const ModelWeights& weights);
  Tensor f32(const TensorSpec& spec) const override;

 private:
  const ModelWeights& weights_;
};

// A Hugging Face model directory (config.json + model.safetensors or shards with an index),
// checked against the config when opened: missing, unexpected and misshapen tensors and
// non-float dtypes fail here, naming the file and the tensor. Each tensor is read from the
// mapping and its pages are handed back after conversion, so reading a 16 GB checkpoint does
// not leave 16 GB resident.
class ModelDirTensorSource : public TensorSource {
 public:
  explicit ModelDirTensorSource(const std::string& dir);
  Tensor f32(const TensorSpec& spec) const override;

 private:
  ModelDirTensorSource(ModelConfig config, const std::string& dir);
  SafetensorsSet set_;
  std::map<std::string, std::string> file_name_;  // our name -> the name in the file
};

}  // namespace stoa
