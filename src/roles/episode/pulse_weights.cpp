#include "roles/episode/pulse_weights.h"

#include <cstring>
#include <map>

#include "core/dtype.h"
#include "core/int8_grid.h"

namespace stoa::episode {

Tensor state_tensor_as_f32(const pulse::StateTensor& t) {
  Tensor out(DType::kF32, t.shape);
  switch (t.kind) {
    case pulse::TensorKind::kInt8:
      int8_dequantize(t.q, out.as<float>());
      break;
    case pulse::TensorKind::kBf16:
      convert_bf16_to_f32(t.bf16.data(), out.as<float>(), t.bf16.size());
      break;
    case pulse::TensorKind::kF32:
      if (!t.f32.empty()) std::memcpy(out.as<float>(), t.f32.data(), t.f32.size() * sizeof(float));
      break;
  }
  return out;
}

engine::EngineWeights engine_weights_from_state(
    const ModelConfig& config,
    const std::vector<std::pair<std::string, pulse::StateTensor>>& tensors) {
  std::map<std::string, Int8Matrix> int8;
  std::map<std::string, Tensor> f32;
  for (const auto& [name, t] : tensors) {
    if (t.kind == pulse::TensorKind::kInt8)
      int8.emplace(name, t.q);
    else
      f32.emplace(name, state_tensor_as_f32(t));
  }
  return engine::EngineWeights::from_state(config, std::move(int8), std::move(f32));
}

}  // namespace stoa::episode
