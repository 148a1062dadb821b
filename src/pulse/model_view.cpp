#include "pulse/model_view.h"

#include <nlohmann/json.hpp>

namespace stoa::pulse {

Hash128 config_hash(const ModelConfig& config) {
  // The model's shape, not its codec: a tokenizer.json is not hashed, nor is the config's word
  // that its tokens are bytes (saying so later must not make the run's versions another model's).
  ModelConfig shape = config;
  shape.byte_tokens = false;
  std::string text = model_config_to_json(shape).dump();
  return hash_bytes(text.data(), text.size());
}

WeightViews weight_views(const ModelWeights& weights) {
  WeightViews views;
  for (const auto& [name, tensor] : weights.tensors) views.emplace(name, tensor.view());
  return views;
}

Int8State int8_view_of(const ModelWeights& weights, uint64_t version, Int8Quantizer* quantizer) {
  quantizer->set_config_hash(config_hash(weights.config));
  return quantizer->quantize(weight_views(weights), version);
}

}  // namespace stoa::pulse
