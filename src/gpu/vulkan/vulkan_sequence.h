// A token sequence of the Vulkan backend (engine/backend.h's SequenceState): its tokens on the
// host, its state in device memory: the KV cache, all layers in one buffer per side, [layers]
// [capacity][kv_dim], and LFM2's conv windows, [layers][L - 1][hidden] (zero at the start), all
// allocated whole when the sequence is made (a decode slot's memory is fixed then, so an append
// never allocates on the device).
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "engine/backend.h"
#include "gpu/vulkan/context.h"
#include "model/config.h"

namespace stoa::gpu::vulkan {

class VulkanSequence final : public engine::SequenceState {
 public:
  // `owner` identifies the device whose memory holds it (a pass refuses another's sequence).
  VulkanSequence(std::shared_ptr<Context> ctx, const void* owner, const ModelConfig& config,
                 int64_t capacity);

  int64_t length() const override { return static_cast<int64_t>(tokens_.size()); }
  int64_t capacity() const override { return capacity_; }
  const std::vector<int32_t>& tokens() const override { return tokens_; }
  void preallocate() override {}  // the device memory is whole from the start
  // A copy of the tokens and of the cache rows in use (the device is idle between passes, and
  // the memory is host-visible: a copy through the mappings).
  std::unique_ptr<engine::SequenceState> fork_state() const override;

  const void* owner() const { return owner_; }
  // Whether its state has the shape `config`'s passes write (layers, KV width, conv window).
  bool made_for(const ModelConfig& config) const {
    return config.num_layers == config_.num_layers &&
           config.num_kv_heads * config.head_dim == kv_dim_ &&
           config.hidden_size == config_.hidden_size && config.conv_kernel == config_.conv_kernel &&
           config.arch == config_.arch;
  }
  const Buffer& keys() const { return keys_; }
  const Buffer& values() const { return values_; }
  const Buffer& conv() const { return conv_; }
  // Float offset of layer `layer`'s conv window in conv().
  int64_t conv_base(int64_t layer) const { return layer * conv_floats_; }
  // Byte offset of position `pos` of layer `layer` in keys() and values().
  size_t offset(int64_t layer, int64_t pos) const {
    return static_cast<size_t>((layer * capacity_ + pos) * kv_dim_) * sizeof(float);
  }
  // Records tokens whose keys and values a pass has just written.
  void commit(const int32_t* tokens, int64_t n) {
    tokens_.insert(tokens_.end(), tokens, tokens + n);
  }

 private:
  std::shared_ptr<Context> ctx_;
  const void* owner_;
  ModelConfig config_;
  int64_t capacity_ = 0;
  int64_t kv_dim_ = 0;
  int64_t conv_floats_ = 0;  // per layer: (L - 1) * hidden
  std::vector<int32_t> tokens_;
  Buffer keys_, values_, conv_;
};

}  // namespace stoa::gpu::vulkan
