#include "gpu/vulkan/vulkan_sequence.h"

#include <algorithm>
#include <cstring>

namespace stoa::gpu::vulkan {

VulkanSequence::VulkanSequence(std::shared_ptr<Context> ctx, const void* owner,
                               const ModelConfig& config, int64_t capacity)
    : ctx_(std::move(ctx)),
      owner_(owner),
      config_(config),
      capacity_(capacity),
      kv_dim_(config.num_kv_heads * config.head_dim),
      conv_floats_(config.arch == Arch::kQwen3
                       ? 0
                       : std::max<int64_t>(config.conv_kernel - 1, 0) * config.hidden_size) {
  const auto bytes = static_cast<size_t>(config.num_layers * capacity * kv_dim_) * sizeof(float);
  keys_ = ctx_->make_buffer(bytes);
  values_ = ctx_->make_buffer(bytes);
  conv_ = ctx_->make_buffer(static_cast<size_t>(config.num_layers * conv_floats_) * sizeof(float));
  std::memset(conv_.data(), 0, conv_.size());
}

std::unique_ptr<engine::SequenceState> VulkanSequence::fork_state() const {
  auto copy = std::make_unique<VulkanSequence>(ctx_, owner_, config_, capacity_);
  copy->tokens_ = tokens_;
  const size_t used = static_cast<size_t>(length() * kv_dim_) * sizeof(float);
  for (int64_t layer = 0; layer < config_.num_layers; ++layer) {
    const size_t at = offset(layer, 0);
    std::memcpy(static_cast<char*>(copy->keys_.data()) + at,
                static_cast<const char*>(keys_.data()) + at, used);
    std::memcpy(static_cast<char*>(copy->values_.data()) + at,
                static_cast<const char*>(values_.data()) + at, used);
  }
  std::memcpy(copy->conv_.data(), conv_.data(), conv_.size());
  return copy;
}

}  // namespace stoa::gpu::vulkan
