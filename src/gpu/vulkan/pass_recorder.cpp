#include "gpu/vulkan/pass_recorder.h"

#include <stdexcept>

namespace stoa::gpu::vulkan {
namespace {

constexpr uint32_t kSetsPerPool = 1024;
constexpr uint32_t kMaxBindings = 8;  // the most storage buffers a kernel binds

}  // namespace

PassRecorder::PassRecorder(Context& ctx) : ctx_(ctx) {}

PassRecorder::~PassRecorder() {
  if (cmd_ != VK_NULL_HANDLE) ctx_.abandon_commands(cmd_);  // recorded, never submitted
  for (VkDescriptorPool pool : pools_) vkDestroyDescriptorPool(ctx_.device(), pool, nullptr);
}

VkDescriptorPool PassRecorder::new_pool() {
  VkDescriptorPoolSize size{};
  size.type = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
  size.descriptorCount = kSetsPerPool * kMaxBindings;
  VkDescriptorPoolCreateInfo info{};
  info.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO;
  info.maxSets = kSetsPerPool;
  info.poolSizeCount = 1;
  info.pPoolSizes = &size;
  VkDescriptorPool pool = VK_NULL_HANDLE;
  check(vkCreateDescriptorPool(ctx_.device(), &info, nullptr, &pool), "vkCreateDescriptorPool");
  pools_.push_back(pool);
  return pool;
}

void PassRecorder::begin() {
  if (cmd_ != VK_NULL_HANDLE) throw std::logic_error("PassRecorder::begin: a pass is recording");
  for (VkDescriptorPool pool : pools_)
    check(vkResetDescriptorPool(ctx_.device(), pool, 0), "vkResetDescriptorPool");
  current_pool_ = 0;
  cmd_ = ctx_.begin_commands();
}

VkDescriptorSet PassRecorder::allocate_set(VkDescriptorSetLayout layout) {
  for (;;) {
    if (current_pool_ == pools_.size()) new_pool();
    VkDescriptorSetAllocateInfo alloc{};
    alloc.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO;
    alloc.descriptorPool = pools_[current_pool_];
    alloc.descriptorSetCount = 1;
    alloc.pSetLayouts = &layout;
    VkDescriptorSet set = VK_NULL_HANDLE;
    const VkResult r = vkAllocateDescriptorSets(ctx_.device(), &alloc, &set);
    if (r == VK_SUCCESS) return set;
    if (r != VK_ERROR_OUT_OF_POOL_MEMORY && r != VK_ERROR_FRAGMENTED_POOL)
      check(r, "vkAllocateDescriptorSets");
    ++current_pool_;  // this pool is full: the next (made on demand)
  }
}

void PassRecorder::dispatch(const Kernel& kernel, std::initializer_list<const Buffer*> buffers,
                            const void* push, uint32_t groups_x, uint32_t groups_y,
                            uint32_t groups_z) {
  if (cmd_ == VK_NULL_HANDLE) throw std::logic_error("PassRecorder::dispatch outside a pass");
  if (buffers.size() != kernel.bindings() || buffers.size() > kMaxBindings)
    throw std::invalid_argument("PassRecorder::dispatch: one buffer per binding");
  const VkDescriptorSet set = allocate_set(kernel.set_layout());
  VkDescriptorBufferInfo infos[kMaxBindings];
  VkWriteDescriptorSet writes[kMaxBindings];
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
  vkUpdateDescriptorSets(ctx_.device(), i, writes, 0, nullptr);
  vkCmdBindPipeline(cmd_, VK_PIPELINE_BIND_POINT_COMPUTE, kernel.pipeline());
  vkCmdBindDescriptorSets(cmd_, VK_PIPELINE_BIND_POINT_COMPUTE, kernel.pipeline_layout(), 0, 1,
                          &set, 0, nullptr);
  if (kernel.push_bytes() > 0)
    vkCmdPushConstants(cmd_, kernel.pipeline_layout(), VK_SHADER_STAGE_COMPUTE_BIT, 0,
                       kernel.push_bytes(), push);
  vkCmdDispatch(cmd_, groups_x, groups_y, groups_z);
  barrier();
}

void PassRecorder::copy(const Buffer& src, size_t src_offset, const Buffer& dst, size_t dst_offset,
                        size_t bytes) {
  if (cmd_ == VK_NULL_HANDLE) throw std::logic_error("PassRecorder::copy outside a pass");
  if (bytes == 0) return;
  if (src_offset + bytes > src.size() || dst_offset + bytes > dst.size())
    throw std::out_of_range("PassRecorder::copy: a range outside its buffer");
  VkBufferCopy region{};
  region.srcOffset = src_offset;
  region.dstOffset = dst_offset;
  region.size = bytes;
  vkCmdCopyBuffer(cmd_, src.handle(), dst.handle(), 1, &region);
}

void PassRecorder::barrier() {
  VkMemoryBarrier b{};
  b.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER;
  b.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
  b.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT |
                    VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
  const VkPipelineStageFlags stages =
      VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT;
  vkCmdPipelineBarrier(cmd_, stages, stages, 0, 1, &b, 0, nullptr, 0, nullptr);
}

void PassRecorder::submit_and_wait() {
  if (cmd_ == VK_NULL_HANDLE) throw std::logic_error("PassRecorder::submit_and_wait: no pass");
  VkMemoryBarrier b{};
  b.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER;
  b.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
  b.dstAccessMask = VK_ACCESS_HOST_READ_BIT;
  vkCmdPipelineBarrier(cmd_, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
                       VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &b, 0, nullptr, 0, nullptr);
  VkCommandBuffer cmd = cmd_;
  cmd_ = VK_NULL_HANDLE;
  ctx_.end_and_wait(cmd);
}

}  // namespace stoa::gpu::vulkan
