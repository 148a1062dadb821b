// The bridge from the model layer to PULSE: a model's f32 weights as the quantiser's input, and
// the config hash that goes into the model fingerprint (so a worker holding another model, or
// the same tensors under another config, refuses every blob).
#pragma once
#include "core/hash.h"
#include "model/config.h"
#include "model/weights.h"
#include "pulse/int8_state.h"
#include "pulse/quantizer.h"

namespace stoa::pulse {

// xxh3-128 of the config's canonical JSON (model_config_to_json, compact dump).
Hash128 config_hash(const ModelConfig& config);

// Non-owning views of every tensor of `weights` (they must outlive the views).
WeightViews weight_views(const ModelWeights& weights);

// Quantises a model onto a fresh grid at `version`, fingerprinted with its config.
Int8State int8_view_of(const ModelWeights& weights, uint64_t version, Int8Quantizer* quantizer);

}  // namespace stoa::pulse
