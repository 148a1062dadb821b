// The engine's weights from a verified PULSE state. The worker builds its engine this way from an
// anchor and the replay validator builds one per version it replays: one conversion, so a replay
// computes on the same bits as the rollout it checks. It lives here, below both, because it joins
// two services (the engine and PULSE) that do not see each other.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"
#include "engine/engine_weights.h"
#include "model/config.h"
#include "pulse/int8_state.h"

namespace stoa::episode {

// Every tensor of the model, by name (EngineWeights::from_state's rules: kNotFound naming a
// missing one).
engine::EngineWeights engine_weights_from_state(
    const ModelConfig& config,
    const std::vector<std::pair<std::string, pulse::StateTensor>>& tensors);

// A state tensor as the engine holds one in f32: bf16 widened by its bits, f32 copied as its bits
// (the MoE router and expert_bias travel that way: the precision plan), int8 dequantized (an int8
// tensor the engine computes in f32).
Tensor state_tensor_as_f32(const pulse::StateTensor& t);

}  // namespace stoa::episode
