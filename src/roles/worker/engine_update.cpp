#include "roles/worker/engine_update.h"

#include <algorithm>
#include <cstring>

#include "core/error.h"
#include "roles/episode/pulse_weights.h"

namespace stoa::worker {
namespace {

// One verified tensor patch scattered into the engine's storage: rescaled groups first, then the
// points (the patch's order), element by element in whichever layout the engine holds — packed
// panels included, so nothing is copied or repacked.
void scatter(engine::EngineWeights& weights, const pulse::TensorPatch& tp) {
  const uint64_t numel = static_cast<uint64_t>(shape_numel(tp.shape));
  if (tp.kind == pulse::TensorKind::kInt8) {
    engine::Linear& l = weights.int8_linear_mutable(tp.name);
    STOA_CHECK(static_cast<uint64_t>(l.rows() * l.cols()) == numel, ErrorKind::kInvalidArgument,
               "patch of ", tp.name, " is ", shape_string(tp.shape), ", the engine holds [",
               l.rows(), ", ", l.cols(), "]");
    for (size_t k = 0; k < tp.groups.size(); ++k) {
      const auto g = static_cast<int64_t>(tp.groups[k]);
      l.set_int8_scale(g, tp.group_scales[k]);
      for (int64_t j = 0; j < kInt8GroupSize; ++j)
        l.set_int8_value(g * kInt8GroupSize + j, tp.group_values[k * kInt8GroupSize + j]);
    }
    l.exchange_int8_values(tp.positions, tp.i8.data(), nullptr);
    return;
  }
  Tensor& t = weights.f32_mutable(tp.name);
  STOA_CHECK(static_cast<uint64_t>(t.numel()) == numel, ErrorKind::kInvalidArgument, "patch of ",
             tp.name, " is ", shape_string(tp.shape), ", the engine holds ",
             shape_string(t.shape()));
  float* dst = t.as<float>();
  for (size_t i = 0; i < tp.positions.size(); ++i) {
    // bf16 widens to f32 by its bits (exact, as from_state did); f32 travels as its bits.
    const uint32_t bits =
        tp.kind == pulse::TensorKind::kBf16 ? static_cast<uint32_t>(tp.bf16[i]) << 16 : tp.f32[i];
    std::memcpy(dst + tp.positions[i], &bits, sizeof(bits));
  }
}

}  // namespace

engine::EngineWeights engine_weights_from_update(const ModelConfig& config,
                                                 const WeightUpdate& update) {
  STOA_CHECK(update.full, ErrorKind::kInvalidArgument,
             "engine weights need a full update (an anchor), got a patch batch at version ",
             update.version);
  return episode::engine_weights_from_state(config, update.tensors);
}

void apply_update(engine::EngineWeights& weights, const WeightUpdate& update) {
  for (const pulse::Patch& patch : update.patches)
    for (const pulse::TensorPatch& tp : patch.tensors) scatter(weights, tp);
  for (const auto& [name, t] : update.tensors) {
    // An int8 tensor the engine computes in f32 (the MoE router) is dequantized, as from_state
    // did when the engine was built.
    if (t.kind == pulse::TensorKind::kInt8 && weights.has_linear(name) &&
        weights.linear(name).is_int8())
      weights.set_int8(name, t.q);
    else
      weights.set_f32(name, episode::state_tensor_as_f32(t));
  }
}

void apply_update(engine::EngineBackend& backend, const WeightUpdate& update) {
  apply_update(backend.host_weights(), update);
  backend.weights_written(touched_tensors(update));
}

std::vector<std::string> touched_tensors(const WeightUpdate& update) {
  std::vector<std::string> names = update.written;
  for (const auto& [name, t] : update.tensors) names.push_back(name);
  for (const pulse::Patch& patch : update.patches)
    for (const pulse::TensorPatch& tp : patch.tensors) names.push_back(tp.name);
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  return names;
}

}  // namespace stoa::worker
