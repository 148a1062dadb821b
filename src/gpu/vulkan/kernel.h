// One compute shader ready to dispatch: its module, a descriptor set layout of N storage
// buffers (bindings 0..N-1), push constants, the pipeline. A pass records it among others
// (PassRecorder::dispatch); dispatch() here is a pass of its own: it runs, waits, and makes the
// shader's writes visible to the host's mapping.
#pragma once
#include <cstddef>
#include <cstdint>
#include <initializer_list>

#include "gpu/vulkan/context.h"

namespace stoa::gpu::vulkan {

class Kernel {
 public:
  // spirv: the module's words (an embedded array); push_bytes: the push-constant block's size.
  Kernel(Context& ctx, const uint32_t* spirv, size_t spirv_bytes, uint32_t bindings,
         uint32_t push_bytes);
  ~Kernel();
  Kernel(const Kernel&) = delete;
  Kernel& operator=(const Kernel&) = delete;

  // Runs groups_x * groups_y * groups_z workgroups over `buffers` (bindings in order) and waits.
  // Throws std::runtime_error on a Vulkan failure.
  void dispatch(std::initializer_list<const Buffer*> buffers, const void* push, uint32_t groups_x,
                uint32_t groups_y = 1, uint32_t groups_z = 1);

  uint32_t bindings() const { return bindings_; }
  uint32_t push_bytes() const { return push_bytes_; }
  VkPipeline pipeline() const { return pipeline_; }
  VkPipelineLayout pipeline_layout() const { return pipeline_layout_; }
  VkDescriptorSetLayout set_layout() const { return set_layout_; }

 private:
  Context& ctx_;
  uint32_t bindings_ = 0;
  uint32_t push_bytes_ = 0;
  VkShaderModule shader_ = VK_NULL_HANDLE;
  VkDescriptorSetLayout set_layout_ = VK_NULL_HANDLE;
  VkPipelineLayout pipeline_layout_ = VK_NULL_HANDLE;
  VkPipeline pipeline_ = VK_NULL_HANDLE;
};

}  // namespace stoa::gpu::vulkan
