// A pipeline stage's share of a model (docs/design/pipeline.md): a contiguous range of decoder
// layers, the first stage also holding the embeddings and the last the final norm and the
// output head. A whole model is the span [0, num_layers). The span decides which tensors a
// stage loads, patches and hashes, so a stage never holds what it does not compute with.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "model/config.h"
#include "model/tensor_roles.h"

namespace stoa {

struct LayerSpan {
  int64_t first = 0;  // first layer held
  int64_t last = 0;   // one past the last layer held

  int64_t size() const { return last - first; }
  bool embeds() const { return first == 0; }
  bool heads(const ModelConfig& config) const { return last == config.num_layers; }
  bool whole(const ModelConfig& config) const { return embeds() && heads(config); }
  bool holds_layer(int64_t layer) const { return layer >= first && layer < last; }
  bool operator==(const LayerSpan&) const = default;
};

// [0, num_layers).
LayerSpan whole_model(const ModelConfig& config);
// kInvalidArgument unless 0 <= first < last <= num_layers.
void check_span(const ModelConfig& config, LayerSpan span);
// "layers [4, 8) of 16" — for errors and logs.
std::string span_string(const ModelConfig& config, LayerSpan span);

// Whether the stage of `span` holds `slot`: a layer tensor of one of its layers, the embedding
// when it embeds (or heads, when the head is tied to the embedding), the final norm and an
// untied head when it heads.
bool span_holds(const ModelConfig& config, LayerSpan span, const TensorSlot& slot);
// The tensors of `span`, in table order.
std::vector<TensorSlot> span_tensor_slots(const ModelConfig& config, LayerSpan span);

// `stages` contiguous spans covering the model, layer counts as even as they go (the first
// stages take the remainder: the last one also computes the head).
std::vector<LayerSpan> split_layers(const ModelConfig& config, int64_t stages);

}  // namespace stoa
