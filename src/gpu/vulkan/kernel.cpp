#include "gpu/vulkan/kernel.h"

#include <vector>

#include "gpu/vulkan/pass_recorder.h"

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
}

Kernel::~Kernel() {
  VkDevice dev = ctx_.device();
  vkDestroyPipeline(dev, pipeline_, nullptr);
  vkDestroyPipelineLayout(dev, pipeline_layout_, nullptr);
  vkDestroyDescriptorSetLayout(dev, set_layout_, nullptr);
  vkDestroyShaderModule(dev, shader_, nullptr);
}

void Kernel::dispatch(std::initializer_list<const Buffer*> buffers, const void* push,
                      uint32_t groups_x, uint32_t groups_y, uint32_t groups_z) {
  // A pass of one dispatch (the recorder's barrier and the host barrier at its end included).
  PassRecorder pass(ctx_);
  pass.begin();
  pass.dispatch(*this, buffers, push, groups_x, groups_y, groups_z);
  pass.submit_and_wait();
}

}  // namespace stoa::gpu::vulkan
