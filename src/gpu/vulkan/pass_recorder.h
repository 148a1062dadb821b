// One command buffer holding a whole forward pass: the Vulkan backend records every dispatch and
// copy of a pass here and submits once (a submit and wait per kernel, as Kernel::dispatch does
// for the tests, would cost a round trip per operation: ~15 per layer). Each command is followed
// by a full compute/transfer barrier, because every step of a pass reads what the step before
// wrote; the end makes the device's writes visible to the host's mappings.
//
// Descriptor sets come from pools that reset at begin(); a pool that runs out is followed by
// another, so a pass of any length records.
#pragma once
#include <vulkan/vulkan.h>

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <vector>

#include "gpu/vulkan/context.h"
#include "gpu/vulkan/kernel.h"

namespace stoa::gpu::vulkan {

class PassRecorder {
 public:
  explicit PassRecorder(Context& ctx);
  ~PassRecorder();
  PassRecorder(const PassRecorder&) = delete;
  PassRecorder& operator=(const PassRecorder&) = delete;

  // Starts a pass (the descriptor sets of the previous one are released).
  void begin();
  // kernel over `buffers` (bindings in order) with its push constants, then a barrier.
  void dispatch(const Kernel& kernel, std::initializer_list<const Buffer*> buffers,
                const void* push, uint32_t groups_x, uint32_t groups_y = 1, uint32_t groups_z = 1);
  // bytes from src at src_offset to dst at dst_offset (no barrier: several copies may follow
  // one another; call barrier() before a command reads them).
  void copy(const Buffer& src, size_t src_offset, const Buffer& dst, size_t dst_offset,
            size_t bytes);
  void barrier();
  // Ends the pass, submits it and waits; the host may read the buffers after. Throws
  // std::runtime_error on a Vulkan failure (the pass is dropped either way).
  void submit_and_wait();
  bool recording() const { return cmd_ != VK_NULL_HANDLE; }

 private:
  VkDescriptorSet allocate_set(VkDescriptorSetLayout layout);
  VkDescriptorPool new_pool();

  Context& ctx_;
  VkCommandBuffer cmd_ = VK_NULL_HANDLE;
  std::vector<VkDescriptorPool> pools_;
  size_t current_pool_ = 0;
};

}  // namespace stoa::gpu::vulkan
