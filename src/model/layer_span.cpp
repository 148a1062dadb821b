#include "model/layer_span.h"

#include "core/error.h"

namespace stoa {

LayerSpan whole_model(const ModelConfig& config) {
  return LayerSpan{0, config.num_layers};
}

void check_span(const ModelConfig& config, LayerSpan span) {
  STOA_CHECK(span.first >= 0 && span.first < span.last && span.last <= config.num_layers,
             ErrorKind::kInvalidArgument, "layer span [", span.first, ", ", span.last,
             ") is not a non-empty range of the model's ", config.num_layers, " layers");
}

std::string span_string(const ModelConfig& config, LayerSpan span) {
  return "layers [" + std::to_string(span.first) + ", " + std::to_string(span.last) + ") of " +
         std::to_string(config.num_layers);
}

bool span_holds(const ModelConfig& config, LayerSpan span, const TensorSlot& slot) {
  if (slot.layer >= 0) return span.holds_layer(slot.layer);
  switch (slot.row->role) {
    case TensorRole::kEmbedding:
      // A tied head computes the logits with the embedding table.
      return span.embeds() || (span.heads(config) && config.tie_word_embeddings);
    case TensorRole::kFinalNorm:
    case TensorRole::kLmHead:
      return span.heads(config);
    default:
      fail(ErrorKind::kInternal, "model-level tensor ", slot.name, " of role ",
           tensor_role_name(slot.row->role), " has no stage");
  }
}

std::vector<TensorSlot> span_tensor_slots(const ModelConfig& config, LayerSpan span) {
  check_span(config, span);
  std::vector<TensorSlot> out;
  for (TensorSlot& slot : tensor_slots(config))
    if (span_holds(config, span, slot)) out.push_back(std::move(slot));
  return out;
}

std::vector<LayerSpan> split_layers(const ModelConfig& config, int64_t stages) {
  STOA_CHECK(stages >= 1 && stages <= config.num_layers, ErrorKind::kInvalidArgument,
             "cannot split ", config.num_layers, " layers into ", stages, " stages");
  std::vector<LayerSpan> out;
  const int64_t base = config.num_layers / stages;
  const int64_t extra = config.num_layers % stages;
  int64_t first = 0;
  for (int64_t s = 0; s < stages; ++s) {
    const int64_t n = base + (s < extra ? 1 : 0);
    out.push_back(LayerSpan{first, first + n});
    first += n;
  }
  return out;
}

}  // namespace stoa
