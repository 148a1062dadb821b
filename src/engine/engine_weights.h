// The weights the engine computes with: every linear map as a Linear (f32 or int8) and every
// other tensor (norms, the LFM2 conv kernel, the MoE expert bias) as f32, keyed by its Hugging
// Face name. Two ways in: quantize an f32 ModelWeights (the oracle, `stoa generate`), or take a
// ready int8 state (what PULSE delivers to a worker). Tensors can be replaced in place between
// decode steps; the blocks hold pointers into this object, so it never moves its tensors.
#pragma once
#include <cstdint>
#include <map>
#include <span>
#include <string>

#include "core/int8_grid.h"
#include "core/tensor.h"
#include "engine/linear.h"
#include "model/config.h"
#include "model/layer_span.h"
#include "model/tensor_source.h"
#include "model/weights.h"

namespace stoa::engine {

enum class WeightFormat { kF32, kInt8 };
const char* weight_format_name(WeightFormat format);

// Which tensors live on the int8 grid. Mirrors what llama.cpp keeps in Q8_0 in a Q8_0 GGUF so
// that our int8 path and llama.cpp's see the same weights: every 2-D weight whose input dim is
// a multiple of 32 (embeddings and lm_head included), except the MoE router gate
// (".feed_forward.gate.weight", llama.cpp's ffn_gate_inp, never quantized). Norms, the conv
// kernel and the expert bias stay f32.
bool int8_eligible(const std::string& name, const Shape& shape);

class EngineWeights {
 public:
  // Quantizes (kInt8) or copies (kF32) every tensor the config expects; checks names and shapes.
  static EngineWeights from_model(const ModelWeights& weights, WeightFormat format);
  // A pipeline stage's share (model/layer_span.h): only the tensors of `span`.
  static EngineWeights from_model(const ModelWeights& weights, WeightFormat format, LayerSpan span);
  // The same streamed from a source, tensor by tensor: only the span's tensors are ever read,
  // one wide copy at a time (a stage never holds the whole model, even while loading). The
  // values are from_model's for the same weights (blocks a source stores on the int8 grid pass
  // through as they are).
  static EngineWeights from_source(const TensorSource& source, WeightFormat format, LayerSpan span);
  // A pre-quantized state (what a worker receives): `int8` holds the int8 tensors, `f32` every
  // other tensor, in f32, bf16 or f16 (widened to f32). Each expected tensor must appear in
  // exactly one of the two. An int8 tensor that is not int8_eligible (the MoE router) is
  // dequantized, since the engine computes it in f32.
  static EngineWeights from_state(const ModelConfig& config, std::map<std::string, Int8Matrix> int8,
                                  std::map<std::string, Tensor> f32);
  // The same, tensor by tensor (a worker streaming an anchor from its file: one tensor's grid
  // copy alive at a time, packed as it arrives): begin_state, then add_state_int8 /
  // add_state_f32 for every expected tensor once, then finish_state (kNotFound naming a tensor
  // that never came).
  static EngineWeights begin_state(const ModelConfig& config);
  // A stage's state: the tensors of `span` are expected, and any other is refused.
  static EngineWeights begin_state(const ModelConfig& config, LayerSpan span);
  void add_state_int8(const std::string& name, Int8Matrix matrix);
  void add_state_f32(const std::string& name, Tensor tensor);  // f32, bf16 or f16
  void finish_state();

  EngineWeights(EngineWeights&&) noexcept = default;
  EngineWeights& operator=(EngineWeights&&) noexcept = default;

  const ModelConfig& config() const { return config_; }
  WeightFormat format() const { return format_; }
  // The layers held (whole_model unless these are a pipeline stage's weights).
  LayerSpan span() const { return span_; }

  bool has_linear(const std::string& name) const { return linears_.count(name) != 0; }
  const Linear& linear(const std::string& name) const;  // kNotFound naming the tensor
  // An f32 non-linear tensor; checks its element count when `numel` >= 0.
  const float* vec(const std::string& name, int64_t numel = -1) const;
  // The embedding table and the output projection (the same Linear when tied); a stage holds
  // the first when its span embeds, the second when it heads.
  const Linear& embedding() const;
  const Linear& lm_head() const;

  // In-place updates between decode steps. Shapes must match; set_int8_values keeps the scales
  // (PULSE's frozen grid), set_int8 replaces values and scales.
  void set_int8_values(const std::string& name, std::span<const int8_t> values);
  void set_int8(const std::string& name, Int8Matrix matrix);
  void set_f32(const std::string& name, const Tensor& tensor);
  // Element access for in-place scatters (a PULSE patch, roles/worker/engine_update): the int8
  // Linear named `name`, or the f32 storage of a vector or f32 Linear. kNotFound otherwise.
  Linear& int8_linear_mutable(const std::string& name) { return int8_linear(name); }
  Tensor& f32_mutable(const std::string& name);

  // The int8 matmul backend of every Linear (linear.h); f32 Linears ignore it.
  void set_backend(Backend backend);

  // Every tensor in name order, for hashing and inspection.
  const std::map<std::string, Linear>& linears() const { return linears_; }
  const std::map<std::string, Tensor>& vectors() const { return vectors_; }
  size_t nbytes() const;

 private:
  EngineWeights() = default;
  Linear& int8_linear(const std::string& name);  // kNotFound unless an int8 Linear
  // The shape the config implies for `name`, which must still be missing (built by state).
  const Shape& take_pending(const std::string& name);
  // Touches the embedding and the head the span holds, so a missing one fails at load.
  void check_ends() const;
  ModelConfig config_;
  LayerSpan span_;
  WeightFormat format_ = WeightFormat::kF32;
  std::map<std::string, Linear> linears_;  // node-based: pointers stay valid across updates
  std::map<std::string, Tensor> vectors_;
  std::map<std::string, Shape> pending_;  // tensors begin_state still waits for
};

}  // namespace stoa::engine
