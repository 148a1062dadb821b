// The decode state of one token sequence: a KV cache per attention layer and the rolling conv
// state per LFM2 conv layer, plus the tokens consumed so far. Token i sits at position i, so
// the length is the next position. Sequences are values: fork() copies the state, which is how
// several rollouts share one prompt prefix; appending tool observations is an ordinary
// multi-token append (ModelRunner::append) on an existing sequence.
#pragma once
#include <cstdint>
#include <limits>
#include <memory>
#include <vector>

#include "engine/backend.h"
#include "model/config.h"

namespace stoa::engine {

// The CPU engine's SequenceState (backend.h).
class Sequence final : public SequenceState {
 public:
  // `capacity` bounds the tokens it may ever hold; memory grows with use, not with capacity,
  // unless preallocate() is called.
  Sequence(const ModelConfig& config, int64_t capacity);
  Sequence(Sequence&&) noexcept = default;
  Sequence& operator=(Sequence&&) noexcept = default;
  Sequence(const Sequence&) = delete;  // copies are explicit: fork()
  Sequence& operator=(const Sequence&) = delete;

  // Reserves the KV cache for the whole capacity now, so appends never allocate or move the
  // cache (a decode slot's memory is fixed when the slot is made). Forks of a preallocated
  // sequence are preallocated too.
  void preallocate() override;
  bool preallocated() const { return preallocated_; }

  // A deep copy of the state, optionally with another capacity (>= length()).
  Sequence fork() const { return fork(capacity_); }
  Sequence fork(int64_t capacity) const;
  std::unique_ptr<SequenceState> fork_state() const override {
    return std::make_unique<Sequence>(fork());
  }

  int64_t length() const override { return static_cast<int64_t>(tokens_.size()); }
  int64_t capacity() const override { return capacity_; }
  const std::vector<int32_t>& tokens() const override { return tokens_; }
  size_t nbytes() const;

  // Per-layer state, used by the blocks during a forward pass.
  struct LayerState {
    std::vector<float> keys;    // [length, kv_heads * head_dim] (attention layers)
    std::vector<float> values;  // same
    std::vector<float> conv;    // [conv_kernel - 1, hidden]: the last inputs, oldest first
    // The smallest nonzero |key| and |value| ever written here (+inf: none yet): bounds that let
    // attention skip v2's summand flush where it cannot change a term (vec_ops.h
    // attention_scores). Only ever lowered, so a rewritten cache keeps a valid bound.
    float key_floor = std::numeric_limits<float>::infinity();
    float value_floor = std::numeric_limits<float>::infinity();
    // The largest |value| ever written (+inf once one was infinite or NaN; only ever raised):
    // while finite, attention skips keys whose weight is 0 (their terms are zeros).
    float value_ceiling = 0.0f;
  };
  LayerState& layer(int64_t i) { return layers_.at(static_cast<size_t>(i)); }
  const LayerState& layer(int64_t i) const { return layers_.at(static_cast<size_t>(i)); }
  int64_t num_layers() const { return static_cast<int64_t>(layers_.size()); }
  int64_t kv_dim() const { return kv_dim_; }
  int64_t hidden() const { return hidden_; }

  // Records tokens whose state the layers have just written (ModelRunner calls this).
  void commit(const int32_t* tokens, int64_t n);

 private:
  Sequence() = default;
  int64_t capacity_ = 0;
  int64_t kv_dim_ = 0;
  int64_t hidden_ = 0;
  bool preallocated_ = false;
  std::vector<int32_t> tokens_;
  std::vector<LayerState> layers_;
};

}  // namespace stoa::engine
