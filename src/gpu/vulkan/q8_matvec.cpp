#include "gpu/vulkan/q8_matvec.h"

#include <cstring>
#include <stdexcept>

#include "gpu/vulkan/q8_matvec_spv.h"  // generated at build time: kQ8MatvecSpirv

namespace stoa::gpu::vulkan {
namespace {

constexpr uint32_t kBindings = 5;  // wq, ws, xq, xd, y (shaders/q8_matvec.comp)
constexpr uint32_t kLocalSize = 64;

struct Shape {
  uint32_t rows, cols, batch, y_stride;
};

}  // namespace

Q8Matvec::Q8Matvec(Context& ctx) : ctx_(ctx) {
  VkDevice dev = ctx_.device();
  VkShaderModuleCreateInfo module{};
  module.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO;
  module.codeSize = sizeof(kQ8MatvecSpirv);
  module.pCode = kQ8MatvecSpirv;
  check(vkCreateShaderModule(dev, &module, nullptr, &shader_), "vkCreateShaderModule");

  VkDescriptorSetLayoutBinding bindings[kBindings]{};
  for (uint32_t i = 0; i < kBindings; ++i) {
    bindings[i].binding = i;
    bindings[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
    bindings[i].descriptorCount = 1;
    bindings[i].stageFlags = VK_SHADER_STAGE_COMPUTE_BIT;
  }
  VkDescriptorSetLayoutCreateInfo set_info{};
  set_info.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO;
  set_info.bindingCount = kBindings;
  set_info.pBindings = bindings;
  check(vkCreateDescriptorSetLayout(dev, &set_info, nullptr, &set_layout_),
        "vkCreateDescriptorSetLayout");

  VkPushConstantRange push{};
  push.stageFlags = VK_SHADER_STAGE_COMPUTE_BIT;
  push.size = sizeof(Shape);
  VkPipelineLayoutCreateInfo layout_info{};
  layout_info.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO;
  layout_info.setLayoutCount = 1;
  layout_info.pSetLayouts = &set_layout_;
  layout_info.pushConstantRangeCount = 1;
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
  pool_size.descriptorCount = kBindings;
  VkDescriptorPoolCreateInfo pool_info{};
  pool_info.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO;
  pool_info.flags = VK_DESCRIPTOR_POOL_CREATE_FREE_DESCRIPTOR_SET_BIT;
  pool_info.maxSets = 1;
  pool_info.poolSizeCount = 1;
  pool_info.pPoolSizes = &pool_size;
  check(vkCreateDescriptorPool(dev, &pool_info, nullptr, &descriptor_pool_),
        "vkCreateDescriptorPool");
}

Q8Matvec::~Q8Matvec() {
  VkDevice dev = ctx_.device();
  vkDestroyDescriptorPool(dev, descriptor_pool_, nullptr);
  vkDestroyPipeline(dev, pipeline_, nullptr);
  vkDestroyPipelineLayout(dev, pipeline_layout_, nullptr);
  vkDestroyDescriptorSetLayout(dev, set_layout_, nullptr);
  vkDestroyShaderModule(dev, shader_, nullptr);
}

DeviceQ8Matrix Q8Matvec::upload(const kernels::Int8Weights& w) {
  if (w.cols <= 0 || w.cols % kernels::kQ8Block != 0 || w.rows <= 0)
    throw std::invalid_argument("Q8Matvec::upload: cols must be a positive multiple of 32");
  DeviceQ8Matrix m;
  m.rows = w.rows;
  m.cols = w.cols;
  const size_t value_bytes = static_cast<size_t>(w.rows * w.cols);
  const size_t scale_count = static_cast<size_t>(w.rows * (w.cols / kernels::kQ8Block));
  m.values = ctx_.make_buffer(value_bytes);
  m.scales = ctx_.make_buffer((scale_count + 1) / 2 * 4);  // whole words
  // Bytes in memory order are the shader's little-endian bytes of each word (x86, ARM: little
  // endian; Vulkan hosts are).
  std::memcpy(m.values.data(), w.values, value_bytes);
  std::memset(m.scales.data(), 0, m.scales.size());
  std::memcpy(m.scales.data(), w.scales, scale_count * sizeof(uint16_t));
  return m;
}

void Q8Matvec::run(const DeviceQ8Matrix& m, const kernels::Q8Activations& acts, float* y,
                   int64_t y_stride) {
  if (acts.cols != m.cols || acts.batch <= 0)
    throw std::invalid_argument("Q8Matvec::run: activations do not match the matrix");
  const int64_t groups = m.cols / kernels::kQ8Block;
  Buffer xq = ctx_.make_buffer(static_cast<size_t>(acts.batch * acts.cols));
  Buffer xd = ctx_.make_buffer(static_cast<size_t>(acts.batch * groups) * sizeof(float));
  Buffer out =
      ctx_.make_buffer(static_cast<size_t>((acts.batch - 1) * y_stride + m.rows) * sizeof(float));
  std::memcpy(xq.data(), acts.values, static_cast<size_t>(acts.batch * acts.cols));
  std::memcpy(xd.data(), acts.scales, static_cast<size_t>(acts.batch * groups) * sizeof(float));

  VkDevice dev = ctx_.device();
  VkDescriptorSetAllocateInfo alloc{};
  alloc.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO;
  alloc.descriptorPool = descriptor_pool_;
  alloc.descriptorSetCount = 1;
  alloc.pSetLayouts = &set_layout_;
  VkDescriptorSet set = VK_NULL_HANDLE;
  check(vkAllocateDescriptorSets(dev, &alloc, &set), "vkAllocateDescriptorSets");
  const VkBuffer buffers[kBindings] = {m.values.handle(), m.scales.handle(), xq.handle(),
                                       xd.handle(), out.handle()};
  VkDescriptorBufferInfo infos[kBindings]{};
  VkWriteDescriptorSet writes[kBindings]{};
  for (uint32_t i = 0; i < kBindings; ++i) {
    infos[i].buffer = buffers[i];
    infos[i].range = VK_WHOLE_SIZE;
    writes[i].sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET;
    writes[i].dstSet = set;
    writes[i].dstBinding = i;
    writes[i].descriptorCount = 1;
    writes[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
    writes[i].pBufferInfo = &infos[i];
  }
  vkUpdateDescriptorSets(dev, kBindings, writes, 0, nullptr);

  // The set goes back to the pool however the submission ends (the pool holds one).
  struct SetGuard {
    VkDevice dev;
    VkDescriptorPool pool;
    VkDescriptorSet set;
    ~SetGuard() { vkFreeDescriptorSets(dev, pool, 1, &set); }
  } guard{dev, descriptor_pool_, set};

  const Shape shape{static_cast<uint32_t>(m.rows), static_cast<uint32_t>(m.cols),
                    static_cast<uint32_t>(acts.batch), static_cast<uint32_t>(y_stride)};
  ctx_.submit_and_wait([&](VkCommandBuffer cmd) {
    vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, pipeline_);
    vkCmdBindDescriptorSets(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, pipeline_layout_, 0, 1, &set, 0,
                            nullptr);
    vkCmdPushConstants(cmd, pipeline_layout_, VK_SHADER_STAGE_COMPUTE_BIT, 0, sizeof(Shape),
                       &shape);
    vkCmdDispatch(cmd, static_cast<uint32_t>((m.rows + kLocalSize - 1) / kLocalSize),
                  static_cast<uint32_t>(acts.batch), 1);
    // The shader's writes made visible to the host's reads of the mapping.
    VkMemoryBarrier barrier{};
    barrier.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER;
    barrier.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT;
    barrier.dstAccessMask = VK_ACCESS_HOST_READ_BIT;
    vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_PIPELINE_STAGE_HOST_BIT, 0,
                         1, &barrier, 0, nullptr, 0, nullptr);
  });
  const float* result = static_cast<const float*>(out.data());
  for (int64_t b = 0; b < acts.batch; ++b)
    std::memcpy(y + b * y_stride, result + b * y_stride,
                static_cast<size_t>(m.rows) * sizeof(float));
}

}  // namespace stoa::gpu::vulkan
