#include "gpu/vulkan/context.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace stoa::gpu::vulkan {

void check(VkResult result, const char* what) {
  if (result != VK_SUCCESS)
    throw std::runtime_error(std::string("vulkan: ") + what + " failed (VkResult " +
                             std::to_string(static_cast<int>(result)) + ")");
}

Buffer::Buffer(Buffer&& other) noexcept {
  *this = std::move(other);
}

Buffer& Buffer::operator=(Buffer&& other) noexcept {
  if (this != &other) {
    release();
    device_ = std::exchange(other.device_, VK_NULL_HANDLE);
    buffer_ = std::exchange(other.buffer_, VK_NULL_HANDLE);
    memory_ = std::exchange(other.memory_, VK_NULL_HANDLE);
    mapped_ = std::exchange(other.mapped_, nullptr);
    size_ = std::exchange(other.size_, 0);
    imported_ = std::exchange(other.imported_, false);
  }
  return *this;
}

Buffer::~Buffer() {
  release();
}

void Buffer::release() {
  if (device_ == VK_NULL_HANDLE) return;
  if (mapped_ != nullptr && !imported_) vkUnmapMemory(device_, memory_);
  if (buffer_ != VK_NULL_HANDLE) vkDestroyBuffer(device_, buffer_, nullptr);
  if (memory_ != VK_NULL_HANDLE) vkFreeMemory(device_, memory_, nullptr);
  device_ = VK_NULL_HANDLE;
  buffer_ = VK_NULL_HANDLE;
  memory_ = VK_NULL_HANDLE;
  mapped_ = nullptr;
  size_ = 0;
  imported_ = false;
}

namespace {

// Higher is preferred when no device is named.
int type_rank(VkPhysicalDeviceType type) {
  switch (type) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU:
      return 3;
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU:
      return 2;
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU:
      return 1;
    default:
      return 0;
  }
}

DeviceInfo describe(VkPhysicalDevice physical) {
  VkPhysicalDeviceProperties props{};
  vkGetPhysicalDeviceProperties(physical, &props);
  DeviceInfo info;
  info.name = props.deviceName;
  info.vendor_id = props.vendorID;
  info.device_id = props.deviceID;
  info.api_version = props.apiVersion;
  info.type = props.deviceType;
  if (props.apiVersion >= VK_API_VERSION_1_2) {
    // Float controls and the driver's name are core in 1.2.
    VkPhysicalDeviceFloatControlsProperties floats{};
    floats.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FLOAT_CONTROLS_PROPERTIES;
    VkPhysicalDeviceDriverProperties driver{};
    driver.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES;
    driver.pNext = &floats;
    VkPhysicalDeviceProperties2 props2{};
    props2.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2;
    props2.pNext = &driver;
    vkGetPhysicalDeviceProperties2(physical, &props2);
    info.driver = std::string(driver.driverName) + " " + driver.driverInfo;
    info.rounding_rte_f32 = floats.shaderRoundingModeRTEFloat32 == VK_TRUE;
    info.inf_nan_preserve_f32 = floats.shaderSignedZeroInfNanPreserveFloat32 == VK_TRUE;
    info.denorm_flush_f32 = floats.shaderDenormFlushToZeroFloat32 == VK_TRUE;
    info.denorm_preserve_f32 = floats.shaderDenormPreserveFloat32 == VK_TRUE;
  }
  return info;
}

constexpr const char* kHostImport = VK_EXT_EXTERNAL_MEMORY_HOST_EXTENSION_NAME;

bool has_extension(VkPhysicalDevice physical, const char* name) {
  uint32_t count = 0;
  vkEnumerateDeviceExtensionProperties(physical, nullptr, &count, nullptr);
  std::vector<VkExtensionProperties> all(count);
  if (count > 0) vkEnumerateDeviceExtensionProperties(physical, nullptr, &count, all.data());
  for (const VkExtensionProperties& e : all)
    if (std::string(e.extensionName) == name) return true;
  return false;
}

// What a device lacks for arithmetic v2's shaders, in words, or null when it has all of it.
const char* unfit_for_v2(const DeviceInfo& info) {
  if (info.api_version < VK_API_VERSION_1_2) return "Vulkan 1.2 is needed (float controls)";
  if (!info.rounding_rte_f32) return "it cannot round f32 to nearest even on request";
  if (!info.inf_nan_preserve_f32) return "it cannot promise IEEE infinities and NaNs in f32";
  return nullptr;
}

}  // namespace

std::unique_ptr<Context> Context::create(std::string* why_not) {
  const auto fail = [&](std::string why) -> std::unique_ptr<Context> {
    if (why_not != nullptr) *why_not = std::move(why);
    return nullptr;
  };
  std::unique_ptr<Context> ctx(new Context());
  VkApplicationInfo app{};
  app.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO;
  app.pApplicationName = "stoa";
  app.apiVersion = VK_API_VERSION_1_2;
  VkInstanceCreateInfo instance_info{};
  instance_info.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO;
  instance_info.pApplicationInfo = &app;
  VkResult r = vkCreateInstance(&instance_info, nullptr, &ctx->instance_);
  if (r != VK_SUCCESS)
    return fail("no Vulkan instance (loader or driver missing; VkResult " +
                std::to_string(static_cast<int>(r)) + ")");

  uint32_t count = 0;
  vkEnumeratePhysicalDevices(ctx->instance_, &count, nullptr);
  std::vector<VkPhysicalDevice> physicals(count);
  if (count > 0) vkEnumeratePhysicalDevices(ctx->instance_, &count, physicals.data());
  const char* wanted = std::getenv("STOA_VULKAN_DEVICE");
  const bool named = wanted != nullptr && *wanted != '\0';
  int best_rank = -1;
  std::string refused;  // why each device that was not taken could not be
  for (VkPhysicalDevice p : physicals) {
    const DeviceInfo info = describe(p);
    if (named && info.name.find(wanted) == std::string::npos) continue;
    const char* missing = unfit_for_v2(info);
    if (missing != nullptr) {
      refused += (refused.empty() ? "" : "; ") + info.name + ": " + missing;
      continue;
    }
    const int rank = type_rank(info.type);
    if (rank > best_rank) {
      best_rank = rank;
      ctx->physical_ = p;
      ctx->info_ = info;
    }
  }
  if (ctx->physical_ == VK_NULL_HANDLE) {
    if (count == 0)
      return fail("no Vulkan device (install a driver, e.g. Mesa's lavapipe: mesa-vulkan-drivers)");
    if (!refused.empty())
      return fail("no Vulkan device can run engine arithmetic v2 (" + refused + ")");
    return fail(std::string("no Vulkan device named like '") + (named ? wanted : "") + "'");
  }

  uint32_t families = 0;
  vkGetPhysicalDeviceQueueFamilyProperties(ctx->physical_, &families, nullptr);
  std::vector<VkQueueFamilyProperties> family_props(families);
  vkGetPhysicalDeviceQueueFamilyProperties(ctx->physical_, &families, family_props.data());
  bool found = false;
  for (uint32_t i = 0; i < families && !found; ++i) {
    if (family_props[i].queueFlags & VK_QUEUE_COMPUTE_BIT) {
      ctx->queue_family_ = i;
      found = true;
    }
  }
  if (!found) return fail("the Vulkan device " + ctx->info_.name + " has no compute queue");

  // Host-visible and coherent: written and read through a mapping with no flush calls.
  VkPhysicalDeviceMemoryProperties memory{};
  vkGetPhysicalDeviceMemoryProperties(ctx->physical_, &memory);
  const VkMemoryPropertyFlags want =
      VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
  found = false;
  for (uint32_t i = 0; i < memory.memoryTypeCount && !found; ++i) {
    if ((memory.memoryTypes[i].propertyFlags & want) == want) {
      ctx->memory_type_ = i;
      found = true;
    }
  }
  if (!found) return fail("the Vulkan device " + ctx->info_.name + " has no host-visible memory");
  // Memory only the device reaches (a discrete GPU's VRAM): where buffers the passes read whole
  // every time (the weights) belong, filled through a staging copy. Unified memory has none:
  // there the host-visible memory is the device's own.
  for (uint32_t i = 0; i < memory.memoryTypeCount && ctx->device_local_type_ == UINT32_MAX; ++i) {
    const VkMemoryPropertyFlags flags = memory.memoryTypes[i].propertyFlags;
    if ((flags & VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT) &&
        !(flags & VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT))
      ctx->device_local_type_ = i;
  }

  // Unified memory and host imports (context.h, DeviceInfo::imports_host_memory).
  const VkPhysicalDeviceType type = ctx->info_.type;
  ctx->info_.unified_memory =
      type == VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU || type == VK_PHYSICAL_DEVICE_TYPE_CPU;
  std::vector<const char*> extensions;
  if (ctx->info_.unified_memory && has_extension(ctx->physical_, kHostImport)) {
    VkPhysicalDeviceExternalMemoryHostPropertiesEXT host{};
    host.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_EXTERNAL_MEMORY_HOST_PROPERTIES_EXT;
    VkPhysicalDeviceProperties2 props2{};
    props2.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2;
    props2.pNext = &host;
    vkGetPhysicalDeviceProperties2(ctx->physical_, &props2);
    ctx->info_.import_alignment = static_cast<size_t>(host.minImportedHostPointerAlignment);
    ctx->info_.imports_host_memory = ctx->info_.import_alignment > 0;
    if (ctx->info_.imports_host_memory) extensions.push_back(kHostImport);
  }

  const float priority = 1.0f;
  VkDeviceQueueCreateInfo queue_info{};
  queue_info.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO;
  queue_info.queueFamilyIndex = ctx->queue_family_;
  queue_info.queueCount = 1;
  queue_info.pQueuePriorities = &priority;
  VkDeviceCreateInfo device_info{};
  device_info.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO;
  device_info.queueCreateInfoCount = 1;
  device_info.pQueueCreateInfos = &queue_info;
  device_info.enabledExtensionCount = static_cast<uint32_t>(extensions.size());
  device_info.ppEnabledExtensionNames = extensions.data();
  r = vkCreateDevice(ctx->physical_, &device_info, nullptr, &ctx->device_);
  if (r != VK_SUCCESS)
    return fail("could not open the Vulkan device " + ctx->info_.name + " (VkResult " +
                std::to_string(static_cast<int>(r)) + ")");
  vkGetDeviceQueue(ctx->device_, ctx->queue_family_, 0, &ctx->queue_);
  if (ctx->info_.imports_host_memory) {
    ctx->host_pointer_properties_ = reinterpret_cast<PFN_vkGetMemoryHostPointerPropertiesEXT>(
        vkGetDeviceProcAddr(ctx->device_, "vkGetMemoryHostPointerPropertiesEXT"));
    if (ctx->host_pointer_properties_ == nullptr) ctx->info_.imports_host_memory = false;
  }

  VkCommandPoolCreateInfo pool_info{};
  pool_info.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO;
  pool_info.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
  pool_info.queueFamilyIndex = ctx->queue_family_;
  check(vkCreateCommandPool(ctx->device_, &pool_info, nullptr, &ctx->pool_), "vkCreateCommandPool");
  VkFenceCreateInfo fence_info{};
  fence_info.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO;
  check(vkCreateFence(ctx->device_, &fence_info, nullptr, &ctx->fence_), "vkCreateFence");
  return ctx;
}

Context::~Context() {
  if (device_ != VK_NULL_HANDLE) {
    vkDeviceWaitIdle(device_);
    if (fence_ != VK_NULL_HANDLE) vkDestroyFence(device_, fence_, nullptr);
    if (pool_ != VK_NULL_HANDLE) vkDestroyCommandPool(device_, pool_, nullptr);
    vkDestroyDevice(device_, nullptr);
  }
  if (instance_ != VK_NULL_HANDLE) vkDestroyInstance(instance_, nullptr);
}

Buffer Context::make_buffer(size_t bytes) {
  return allocate(bytes, memory_type_, true);
}

Buffer Context::make_device_buffer(size_t bytes) {
  if (device_local_type_ != UINT32_MAX) return allocate(bytes, device_local_type_, false);
  // No such memory (unified): host-visible memory is the device's; unmapped only when staging
  // is forced, so the copy path runs where it otherwise would not (tests on lavapipe).
  return allocate(bytes, memory_type_, !stage_device_buffers_);
}

void Context::write(const Buffer& dst, size_t offset, const void* src, size_t bytes) {
  if (bytes == 0) return;
  if (offset + bytes > dst.size())
    throw std::out_of_range("vulkan: a write past the end of its buffer");
  if (dst.data() != nullptr) {
    std::memcpy(static_cast<char*>(dst.data()) + offset, src, bytes);
    return;
  }
  // Through a host-visible staging buffer, a bounded piece at a time (the host holds one piece).
  const size_t piece = std::min(bytes, staging_bytes_);
  const Buffer staging = make_buffer(piece);
  for (size_t done = 0; done < bytes; done += piece) {
    const size_t n = std::min(piece, bytes - done);
    std::memcpy(staging.data(), static_cast<const char*>(src) + done, n);
    submit_and_wait([&](VkCommandBuffer cmd) {
      VkBufferCopy region{};
      region.srcOffset = 0;
      region.dstOffset = offset + done;
      region.size = n;
      vkCmdCopyBuffer(cmd, staging.handle(), dst.handle(), 1, &region);
    });
  }
}

Buffer Context::allocate(size_t bytes, uint32_t type, bool map) {
  Buffer b;
  b.device_ = device_;
  b.size_ = bytes < 4 ? 4 : bytes;
  VkBufferCreateInfo info{};
  info.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO;
  info.size = b.size_;
  // Transfers too: a pass copies rows between buffers (keys into a sequence's cache, a fork).
  info.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
               VK_BUFFER_USAGE_TRANSFER_DST_BIT;
  info.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
  check(vkCreateBuffer(device_, &info, nullptr, &b.buffer_), "vkCreateBuffer");
  VkMemoryRequirements req{};
  vkGetBufferMemoryRequirements(device_, b.buffer_, &req);
  if (!(req.memoryTypeBits & (1u << type)))
    throw std::runtime_error("vulkan: the memory type cannot hold a storage buffer");
  VkMemoryAllocateInfo alloc{};
  alloc.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO;
  alloc.allocationSize = req.size;
  alloc.memoryTypeIndex = type;
  check(vkAllocateMemory(device_, &alloc, nullptr, &b.memory_), "vkAllocateMemory");
  check(vkBindBufferMemory(device_, b.buffer_, b.memory_, 0), "vkBindBufferMemory");
  if (map) check(vkMapMemory(device_, b.memory_, 0, VK_WHOLE_SIZE, 0, &b.mapped_), "vkMapMemory");
  return b;
}

Buffer Context::import_host(void* host, size_t bytes) {
  const size_t align = info_.import_alignment;
  if (!info_.imports_host_memory || host == nullptr || bytes == 0 ||
      reinterpret_cast<uintptr_t>(host) % align != 0 || bytes % align != 0)
    throw std::runtime_error("vulkan: host memory cannot be imported here (no import, or " +
                             std::to_string(bytes) + " bytes not aligned to " +
                             std::to_string(align) + ")");
  constexpr auto kHandle = VK_EXTERNAL_MEMORY_HANDLE_TYPE_HOST_ALLOCATION_BIT_EXT;
  VkMemoryHostPointerPropertiesEXT pointer{};
  pointer.sType = VK_STRUCTURE_TYPE_MEMORY_HOST_POINTER_PROPERTIES_EXT;
  check(host_pointer_properties_(device_, kHandle, host, &pointer),
        "vkGetMemoryHostPointerPropertiesEXT");
  Buffer b;
  b.device_ = device_;
  b.size_ = bytes;
  b.imported_ = true;
  VkExternalMemoryBufferCreateInfo external{};
  external.sType = VK_STRUCTURE_TYPE_EXTERNAL_MEMORY_BUFFER_CREATE_INFO;
  external.handleTypes = kHandle;
  VkBufferCreateInfo info{};
  info.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO;
  info.pNext = &external;
  info.size = bytes;
  info.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
               VK_BUFFER_USAGE_TRANSFER_DST_BIT;
  info.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
  check(vkCreateBuffer(device_, &info, nullptr, &b.buffer_), "vkCreateBuffer (imported)");
  VkMemoryRequirements req{};
  vkGetBufferMemoryRequirements(device_, b.buffer_, &req);
  // A host-coherent type: the host's writes (PULSE) reach the device at the next submission
  // with no flush.
  VkPhysicalDeviceMemoryProperties memory{};
  vkGetPhysicalDeviceMemoryProperties(physical_, &memory);
  const uint32_t allowed = req.memoryTypeBits & pointer.memoryTypeBits;
  uint32_t type = UINT32_MAX;
  for (uint32_t i = 0; i < memory.memoryTypeCount && type == UINT32_MAX; ++i)
    if ((allowed & (1u << i)) &&
        (memory.memoryTypes[i].propertyFlags & VK_MEMORY_PROPERTY_HOST_COHERENT_BIT))
      type = i;
  if (type == UINT32_MAX || req.size > bytes)
    throw std::runtime_error("vulkan: no host-coherent memory type can import these pages");
  VkImportMemoryHostPointerInfoEXT import{};
  import.sType = VK_STRUCTURE_TYPE_IMPORT_MEMORY_HOST_POINTER_INFO_EXT;
  import.handleType = kHandle;
  import.pHostPointer = host;
  VkMemoryAllocateInfo alloc{};
  alloc.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO;
  alloc.pNext = &import;
  alloc.allocationSize = bytes;
  alloc.memoryTypeIndex = type;
  check(vkAllocateMemory(device_, &alloc, nullptr, &b.memory_), "vkAllocateMemory (import)");
  check(vkBindBufferMemory(device_, b.buffer_, b.memory_, 0), "vkBindBufferMemory (imported)");
  b.mapped_ = host;
  return b;
}

VkCommandBuffer Context::begin_commands() {
  std::unique_lock lock(recording_);
  VkCommandBufferAllocateInfo alloc{};
  alloc.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO;
  alloc.commandPool = pool_;
  alloc.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  alloc.commandBufferCount = 1;
  VkCommandBuffer cmd = VK_NULL_HANDLE;
  check(vkAllocateCommandBuffers(device_, &alloc, &cmd), "vkAllocateCommandBuffers");
  VkCommandBufferBeginInfo begin{};
  begin.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO;
  begin.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
  if (const VkResult r = vkBeginCommandBuffer(cmd, &begin); r != VK_SUCCESS) {
    vkFreeCommandBuffers(device_, pool_, 1, &cmd);
    check(r, "vkBeginCommandBuffer");
  }
  lock.release();  // held until end_and_wait or abandon_commands
  return cmd;
}

void Context::abandon_commands(VkCommandBuffer cmd) {
  const std::unique_lock lock(recording_, std::adopt_lock);
  vkEndCommandBuffer(cmd);
  vkFreeCommandBuffers(device_, pool_, 1, &cmd);
}

void Context::end_and_wait(VkCommandBuffer cmd) {
  const std::unique_lock lock(recording_, std::adopt_lock);
  // Freed however the submission ends.
  struct Free {
    VkDevice device;
    VkCommandPool pool;
    VkCommandBuffer cmd;
    ~Free() { vkFreeCommandBuffers(device, pool, 1, &cmd); }
  } free_cmd{device_, pool_, cmd};
  check(vkEndCommandBuffer(cmd), "vkEndCommandBuffer");
  VkSubmitInfo submit{};
  submit.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO;
  submit.commandBufferCount = 1;
  submit.pCommandBuffers = &cmd;
  check(vkResetFences(device_, 1, &fence_), "vkResetFences");
  check(vkQueueSubmit(queue_, 1, &submit, fence_), "vkQueueSubmit");
  check(vkWaitForFences(device_, 1, &fence_, VK_TRUE, UINT64_MAX), "vkWaitForFences");
}

}  // namespace stoa::gpu::vulkan
