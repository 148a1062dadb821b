// From verified PULSE state to the engine: the first full update builds the EngineWeights, every
// later one (patch batches and anchor reloads alike) is written in place, so the runner and its
// sequences stay valid and a switch costs only the touched tensors. Called by the generation
// thread at a safe point between two decode steps.
#pragma once
#include <string>
#include <vector>

#include "engine/backend.h"
#include "engine/engine_weights.h"
#include "model/config.h"
#include "roles/worker/weight_sync.h"

namespace stoa::worker {

// kInvalidArgument unless `update.full`.
engine::EngineWeights engine_weights_from_update(const ModelConfig& config,
                                                 const WeightUpdate& update);
// Writes every tensor of `update` into `weights` (shapes must match; kNotFound naming an unknown
// tensor), or scatters its patches in place, in order (the engine must hold the version the
// first patch starts from: every update taken, none skipped).
void apply_update(engine::EngineWeights& weights, const WeightUpdate& update);
// The same into a backend's host weights, then names what changed to the backend
// (EngineBackend::weights_written) so one that computes elsewhere mirrors just those.
void apply_update(engine::EngineBackend& backend, const WeightUpdate& update);
// Every tensor an update writes or wrote (its tensors, its patches' tensors, `written`), each
// once, in name order.
std::vector<std::string> touched_tensors(const WeightUpdate& update);

}  // namespace stoa::worker
