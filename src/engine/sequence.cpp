#include "engine/sequence.h"

#include "core/error.h"

namespace stoa::engine {

Sequence::Sequence(const ModelConfig& config, int64_t capacity) {
  STOA_CHECK(capacity > 0, ErrorKind::kInvalidArgument, "sequence capacity must be positive, got ",
             capacity);
  STOA_CHECK(
      config.num_layers > 0 && static_cast<int64_t>(config.layer_kinds.size()) == config.num_layers,
      ErrorKind::kInvalidArgument, "config has ", config.num_layers, " layers but ",
      config.layer_kinds.size(), " layer kinds");
  capacity_ = capacity;
  kv_dim_ = config.num_kv_heads * config.head_dim;
  hidden_ = config.hidden_size;
  layers_.resize(static_cast<size_t>(config.num_layers));
  for (int64_t i = 0; i < config.num_layers; ++i) {
    if (!config.is_attention_layer(i)) {
      // Zeros are the causal padding before the first token (HF pads, llama.cpp starts at 0).
      layers_[static_cast<size_t>(i)].conv.assign(
          static_cast<size_t>((config.conv_kernel - 1) * config.hidden_size), 0.0f);
    }
  }
}

Sequence Sequence::fork(int64_t capacity) const {
  STOA_CHECK(capacity >= length() && capacity > 0, ErrorKind::kInvalidArgument,
             "cannot fork a sequence of ", length(), " tokens into capacity ", capacity);
  Sequence copy;
  copy.capacity_ = capacity;
  copy.kv_dim_ = kv_dim_;
  copy.hidden_ = hidden_;
  copy.tokens_ = tokens_;
  copy.layers_ = layers_;
  copy.preallocated_ = preallocated_;
  if (preallocated_) copy.preallocate();
  return copy;
}

void Sequence::preallocate() {
  preallocated_ = true;
  tokens_.reserve(static_cast<size_t>(capacity_));
  for (LayerState& l : layers_) {
    if (!l.conv.empty()) continue;  // conv layers hold fixed-size state already
    l.keys.reserve(static_cast<size_t>(capacity_ * kv_dim_));
    l.values.reserve(static_cast<size_t>(capacity_ * kv_dim_));
  }
}

size_t Sequence::nbytes() const {
  size_t total = tokens_.size() * sizeof(int32_t);
  for (const LayerState& l : layers_) {
    total += (l.keys.size() + l.values.size() + l.conv.size()) * sizeof(float);
  }
  return total;
}

void Sequence::commit(const int32_t* tokens, int64_t n) {
  STOA_CHECK(length() + n <= capacity_, ErrorKind::kInternal, "commit past capacity");
  tokens_.insert(tokens_.end(), tokens, tokens + n);
}

}  // namespace stoa::engine
