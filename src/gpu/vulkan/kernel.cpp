#include "gpu/vulkan/kernel.h"

#include <stdexcept>
#include <vector>

namespace stoa::gpu::vulkan {

Kernel::Kernel(Context& ctx, const uint32_t* spirv, size_t spirv_bytes, uint32_t bindings,
               uint32_t push_bytes)
    : ctx_(ctx), bindings_(bindings), push_bytes_(push_bytes) {
  VkDevice dev = ctx_.device();
  VkShaderModuleCreateInfo module{};
  module.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO;
  module.codeSize = spirv_bytes;
  module.pCode = spirv;
  check(vkCreateShaderModule(dev, &module, nullptr, &shader_), "vkCreateShaderModule");

  std::vector<VkDescriptorSetLayoutBinding> layout(bindings);
  for (uint32_t i = 0; i < bindings; ++i) {
    layout[i] = {};
    layout[i].binding = i;
    layout[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
    layout[i].descriptorCount = 1;
    layout[i].stageFlags = VK_SHADER_STAGE_COMPUTE_BIT;
  }
  VkDescriptorSetLayoutCreateInfo set_info{};
  set_info.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO;
  set_info.bindingCount = bindings;
  set_info.pBindings = layout.data();
  check(vkCreateDescriptorSetLayout(dev, &set_info, nullptr, &set_layout_),
        "vkCreateDescriptorSetLayout");

  VkPushConstantRange push{};
  push.stageFlags = VK_SHADER_STAGE_COMPUTE_BIT;
  push.size = push_bytes;
  VkPipelineLayoutCreateInfo layout_info{};
  layout_info.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO;
  layout_info.setLayoutCount = 1;
  layout_info.pSetLayouts = &set_layout_;
  layout_info.pushConstantRangeCount = push_bytes > 0 ? 1 : 0;
  layout_info.pPushConstantRanges = &push;
  check(vkCreatePipelineLayout(dev, &layout_info, nullptr, &pipeline_layout_),
        "vkCreatePipelineLayout");

  VkComputePipelineCreateInfo pipeline_info{};
  pipeline_info.sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO;
  pipeline_info.stage.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO;
  pipeline_info.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
  pipeline_info.stage.module = shader_;
  pipeline_info.stage.pName = "main";
  pipeline_info.layout = pipeline_layout_;
  check(vkCreateComputePipelines(dev, VK_NULL_HANDLE, 1, &pipeline_info, nullptr, &pipeline_),
        "vkCreateComputePipelines");

  VkDescriptorPoolSize pool_size{};
  pool_size.type = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
  pool_size.descriptorCount = bindings;
  VkDescriptorPoolCreateInfo pool_info{};
  pool_info.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO;
  pool_info.flags = VK_DESCRIPTOR_POOL_CREATE_FREE_DESCRIPTOR_SET_BIT;
  pool_info.maxSets = 1;
  pool_info.poolSizeCount = 1;
  pool_info.pPoolSizes = &pool_size;
  check(vkCreateDescriptorPool(dev, &pool_info, nullptr, &descriptor_pool_),
        "vkCreateDescriptorPool");
}

Kernel::~Kernel() {
  VkDevice dev = ctx_.device();
  vkDestroyDescriptorPool(dev, descriptor_pool_, nullptr);
  vkDestroyPipeline(dev, pipeline_, nullptr);
  vkDestroyPipelineLayout(dev, pipeline_layout_, nullptr);
  vkDestroyDescriptorSetLayout(dev, set_layout_, nullptr);
  vkDestroyShaderModule(dev, shader_, nullptr);
}

void Kernel::dispatch(std::initializer_list<const Buffer*> buffers, const void* push,
                      uint32_t groups_x, uint32_t groups_y, uint32_t groups_z) {
  if (buffers.size() != bindings_)
    throw std::invalid_argument("Kernel::dispatch: one buffer per binding");
  VkDevice dev = ctx_.device();
  VkDescriptorSetAllocateInfo alloc{};
  alloc.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO;
  alloc.descriptorPool = descriptor_pool_;
  alloc.descriptorSetCount = 1;
  alloc.pSetLayouts = &set_layout_;
  VkDescriptorSet set = VK_NULL_HANDLE;
  check(vkAllocateDescriptorSets(dev, &alloc, &set), "vkAllocateDescriptorSets");
  // The set goes back to the pool however the submission ends (the pool holds one).
  struct SetGuard {
    VkDevice dev;
    VkDescriptorPool pool;
    VkDescriptorSet set;
    ~SetGuard() { vkFreeDescriptorSets(dev, pool, 1, &set); }
  } guard{dev, descriptor_pool_, set};

  std::vector<VkDescriptorBufferInfo> infos(bindings_);
  std::vector<VkWriteDescriptorSet> writes(bindings_);
  uint32_t i = 0;
  for (const Buffer* b : buffers) {
    infos[i] = {};
    infos[i].buffer = b->handle();
    infos[i].range = VK_WHOLE_SIZE;
    writes[i] = {};
    writes[i].sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET;
    writes[i].dstSet = set;
    writes[i].dstBinding = i;
    writes[i].descriptorCount = 1;
    writes[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
    writes[i].pBufferInfo = &infos[i];
    ++i;
  }
  vkUpdateDescriptorSets(dev, bindings_, writes.data(), 0, nullptr);

  ctx_.submit_and_wait([&](VkCommandBuffer cmd) {
    vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, pipeline_);
    vkCmdBindDescriptorSets(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, pipeline_layout_, 0, 1, &set, 0,
                            nullptr);
    if (push_bytes_ > 0)
      vkCmdPushConstants(cmd, pipeline_layout_, VK_SHADER_STAGE_COMPUTE_BIT, 0, push_bytes_, push);
    vkCmdDispatch(cmd, groups_x, groups_y, groups_z);
    // The shader's writes made visible to the host's reads of the mapping.
    VkMemoryBarrier barrier{};
    barrier.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER;
    barrier.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT;
    barrier.dstAccessMask = VK_ACCESS_HOST_READ_BIT;
    vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_PIPELINE_STAGE_HOST_BIT, 0,
                         1, &barrier, 0, nullptr, 0, nullptr);
  });
}

}  // namespace stoa::gpu::vulkan
