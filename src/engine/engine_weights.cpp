#include "engine/engine_weights.h"

#include <optional>

#include "core/error.h"
#include "model/precision_plan.h"
#include "model/tensor_roles.h"

namespace stoa::engine {
namespace {

Tensor copy_f32(const Tensor& t, const std::string& name) {
  STOA_CHECK(t.dtype() == DType::kF32, ErrorKind::kInvalidArgument, "tensor ", name, " is ",
             dtype_name(t.dtype()), ", the engine expects f32");
  return t.clone();
}

}  // namespace

const char* weight_format_name(WeightFormat format) {
  return format == WeightFormat::kInt8 ? "int8" : "f32";
}

bool int8_eligible(const std::string& name, const Shape& shape) {
  // The precision plan is the one rule shared with PULSE and the GGUF export.
  return carrier_for(name, shape) == Carrier::kInt8Grid;
}

EngineWeights EngineWeights::from_model(const ModelWeights& weights, WeightFormat format) {
  return from_model(weights, format, whole_model(weights.config));
}

EngineWeights EngineWeights::from_model(const ModelWeights& weights, WeightFormat format,
                                        LayerSpan span) {
  EngineWeights out;
  out.config_ = weights.config;
  out.span_ = span;
  out.format_ = format;
  for (const TensorSlot& spec : span_tensor_slots(weights.config, span)) {
    const Tensor& t = weights.at(spec.name);
    STOA_CHECK(t.shape() == spec.shape, ErrorKind::kInvalidArgument, "tensor ", spec.name,
               " has shape ", shape_string(t.shape()), ", the config implies ",
               shape_string(spec.shape));
    if (spec.shape.size() == 2) {
      if (format == WeightFormat::kInt8 && int8_eligible(spec.name, spec.shape)) {
        STOA_CHECK(t.dtype() == DType::kF32, ErrorKind::kInvalidArgument, "tensor ", spec.name,
                   " is ", dtype_name(t.dtype()), ", the engine expects f32");
        out.linears_.emplace(spec.name,
                             Linear::from_int8(int8_quantize(t.as<float>(), t.dim(0), t.dim(1))));
      } else {
        out.linears_.emplace(spec.name, Linear::from_f32(copy_f32(t, spec.name)));
      }
    } else {
      out.vectors_.emplace(spec.name, copy_f32(t, spec.name));
    }
  }
  out.check_ends();
  return out;
}

EngineWeights EngineWeights::from_source(const TensorSource& source, WeightFormat format,
                                         LayerSpan span) {
  EngineWeights out = begin_state(source.config(), span);
  for (const TensorSlot& slot : span_tensor_slots(source.config(), span)) {
    const TensorSpec& spec = source.spec(slot.name);
    if (format == WeightFormat::kInt8 && int8_eligible(spec.name, spec.shape)) {
      std::optional<Int8Matrix> stored = source.int8(spec);
      if (!stored) {
        const Tensor t = source.f32(spec);
        stored = int8_quantize(t.as<float>(), t.dim(0), t.dim(1));
      }
      out.add_state_int8(spec.name, std::move(*stored));
    } else {
      out.add_state_f32(spec.name, source.f32(spec));
    }
  }
  out.finish_state();
  return out;
}

void EngineWeights::check_ends() const {
  if (span_.embeds()) (void)embedding();
  if (span_.heads(config_)) (void)lm_head();
}

EngineWeights EngineWeights::from_state(const ModelConfig& config,
                                        std::map<std::string, Int8Matrix> int8,
                                        std::map<std::string, Tensor> f32) {
  EngineWeights out = begin_state(config);
  for (const auto& [name, m] : int8)
    STOA_CHECK(f32.count(name) == 0, ErrorKind::kInvalidArgument, "tensor ", name,
               " appears both as int8 and as f32 in the state");
  // Moved out one at a time, so each grid copy is released as soon as its Linear holds it.
  for (auto& [name, m] : int8) out.add_state_int8(name, std::move(m));
  for (auto& [name, t] : f32) out.add_state_f32(name, std::move(t));
  out.finish_state();
  return out;
}

EngineWeights EngineWeights::begin_state(const ModelConfig& config) {
  return begin_state(config, whole_model(config));
}

EngineWeights EngineWeights::begin_state(const ModelConfig& config, LayerSpan span) {
  EngineWeights out;
  out.config_ = config;
  out.span_ = span;
  out.format_ = WeightFormat::kF32;  // kInt8 once an int8 tensor arrives
  for (const TensorSlot& slot : span_tensor_slots(config, span))
    out.pending_.emplace(slot.name, slot.shape);
  return out;
}

const Shape& EngineWeights::take_pending(const std::string& name) {
  auto it = pending_.find(name);
  if (it != pending_.end()) return it->second;
  STOA_CHECK(linears_.count(name) == 0 && vectors_.count(name) == 0, ErrorKind::kInvalidArgument,
             "int8 state has tensor ", name, " twice");
  STOA_CHECK(span_.whole(config_), ErrorKind::kInvalidArgument, "int8 state has tensor ", name,
             " that the stage of ", span_string(config_, span_), " does not hold");
  fail(ErrorKind::kInvalidArgument, "int8 state has tensor ", name, " that ",
       arch_name(config_.arch), " does not use");
}

void EngineWeights::add_state_int8(const std::string& name, Int8Matrix m) {
  const Shape spec_shape = take_pending(name);
  STOA_CHECK(spec_shape.size() == 2 && spec_shape[1] % kInt8GroupSize == 0,
             ErrorKind::kInvalidArgument, "tensor ", name, " ", shape_string(spec_shape),
             " cannot be int8 (not a matrix on the 32-wide grid)");
  STOA_CHECK(m.rows == spec_shape[0] && m.cols == spec_shape[1], ErrorKind::kInvalidArgument,
             "int8 tensor ", name, " is [", m.rows, ", ", m.cols, "], the config implies ",
             shape_string(spec_shape));
  format_ = WeightFormat::kInt8;
  if (int8_eligible(name, spec_shape)) {
    linears_.emplace(name, Linear::from_int8(std::move(m)));
  } else {
    // The router arrives on the int8 grid (PULSE quantizes every grid-shaped matrix) but the
    // engine computes it in f32, as llama.cpp does: dequantizing is exact.
    STOA_CHECK(m.values.size() == static_cast<size_t>(m.rows * m.cols) &&
                   m.scales.size() == static_cast<size_t>(m.rows * m.cols / kInt8GroupSize),
               ErrorKind::kInvalidArgument, "int8 tensor ", name, " has ", m.values.size(),
               " values and ", m.scales.size(), " scales for [", m.rows, ", ", m.cols, "]");
    Tensor t(DType::kF32, spec_shape);
    int8_dequantize(m, t.as<float>());
    linears_.emplace(name, Linear::from_f32(std::move(t)));
  }
  pending_.erase(name);
}

void EngineWeights::add_state_f32(const std::string& name, Tensor given) {
  const Shape spec_shape = take_pending(name);
  STOA_CHECK(given.shape() == spec_shape, ErrorKind::kInvalidArgument, "tensor ", name,
             " has shape ", shape_string(given.shape()), ", the config implies ",
             shape_string(spec_shape));
  STOA_CHECK(
      given.dtype() == DType::kF32 || given.dtype() == DType::kBF16 || given.dtype() == DType::kF16,
      ErrorKind::kInvalidArgument, "tensor ", name, " is ", dtype_name(given.dtype()),
      ", expected f32, bf16 or f16");
  // bf16/f16 (how PULSE carries norms) widen to f32 exactly.
  Tensor t = given.dtype() == DType::kF32 ? std::move(given) : to_f32(given.view());
  if (spec_shape.size() == 2)
    linears_.emplace(name, Linear::from_f32(std::move(t)));
  else
    vectors_.emplace(name, std::move(t));
  pending_.erase(name);
}

void EngineWeights::finish_state() {
  STOA_CHECK(pending_.empty(), ErrorKind::kNotFound, "int8 state lacks tensor ",
             pending_.empty() ? std::string() : pending_.begin()->first);
  check_ends();
}

const Linear& EngineWeights::linear(const std::string& name) const {
  auto it = linears_.find(name);
  STOA_CHECK(it != linears_.end(), ErrorKind::kNotFound, "engine weights lack linear tensor ",
             name);
  return it->second;
}

const float* EngineWeights::vec(const std::string& name, int64_t numel) const {
  auto it = vectors_.find(name);
  STOA_CHECK(it != vectors_.end(), ErrorKind::kNotFound, "engine weights lack tensor ", name);
  STOA_CHECK(numel < 0 || it->second.numel() == numel, ErrorKind::kInvalidArgument, "tensor ", name,
             " has ", it->second.numel(), " elements, expected ", numel);
  return it->second.as<float>();
}

// By role (model/tensor_roles.h): a name lookup per pass, nothing next to the matmuls.
const Linear& EngineWeights::embedding() const {
  return linear(tensor_name(config_, TensorRole::kEmbedding));
}

const Linear& EngineWeights::lm_head() const {
  return config_.tie_word_embeddings ? embedding()
                                     : linear(tensor_name(config_, TensorRole::kLmHead));
}

void EngineWeights::set_int8_values(const std::string& name, std::span<const int8_t> values) {
  Linear& l = int8_linear(name);
  STOA_CHECK(values.size() == static_cast<size_t>(l.rows() * l.cols()), ErrorKind::kInvalidArgument,
             "update of ", name, " has ", values.size(), " values, the tensor has ",
             l.rows() * l.cols());
  l.replace_int8_values(values);
}

void EngineWeights::set_int8(const std::string& name, Int8Matrix matrix) {
  Linear& l = int8_linear(name);
  STOA_CHECK(matrix.rows == l.rows() && matrix.cols == l.cols() &&
                 matrix.values.size() == static_cast<size_t>(l.rows() * l.cols()) &&
                 matrix.scales.size() == static_cast<size_t>(l.rows() * l.cols() / kInt8GroupSize),
             ErrorKind::kInvalidArgument, "update of ", name, " is [", matrix.rows, ", ",
             matrix.cols, "], the tensor is [", l.rows(), ", ", l.cols(), "]");
  l.replace_int8(std::move(matrix));
}

Tensor& EngineWeights::f32_mutable(const std::string& name) {
  Tensor* target = nullptr;
  if (auto it = vectors_.find(name); it != vectors_.end()) {
    target = &it->second;
  } else if (auto li = linears_.find(name); li != linears_.end() && !li->second.is_int8()) {
    target = &li->second.f32_mutable();
  }
  STOA_CHECK(target != nullptr, ErrorKind::kNotFound, "engine weights lack f32 tensor ", name);
  return *target;
}

void EngineWeights::set_f32(const std::string& name, const Tensor& tensor) {
  STOA_CHECK(tensor.dtype() == DType::kF32, ErrorKind::kInvalidArgument, "update of ", name, " is ",
             dtype_name(tensor.dtype()), ", expected f32");
  Tensor* target = &f32_mutable(name);
  STOA_CHECK(target->shape() == tensor.shape(), ErrorKind::kInvalidArgument, "update of ", name,
             " has shape ", shape_string(tensor.shape()), ", the tensor is ",
             shape_string(target->shape()));
  std::copy(tensor.as<float>(), tensor.as<float>() + tensor.numel(), target->as<float>());
}

Linear& EngineWeights::int8_linear(const std::string& name) {
  auto it = linears_.find(name);
  STOA_CHECK(it != linears_.end() && it->second.is_int8(), ErrorKind::kNotFound,
             "engine weights lack int8 tensor ", name);
  return it->second;
}

size_t EngineWeights::nbytes() const {
  size_t total = 0;
  for (const auto& [name, l] : linears_) total += l.nbytes();
  for (const auto& [name, t] : vectors_) total += t.nbytes();
  return total;
}

void EngineWeights::set_backend(Backend backend) {
  for (auto& [name, linear] : linears_) linear.set_backend(backend);
}

}  // namespace stoa::engine
