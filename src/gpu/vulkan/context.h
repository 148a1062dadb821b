// A Vulkan compute device for the engine (issue 54): instance, one physical device, one compute
// queue, storage buffers (host-visible, or device-only with staged writes) and one-shot command
// submission, under the Vulkan backend (gpu/vulkan/vulkan_backend.h).
//
// Device choice: STOA_VULKAN_DEVICE (a substring of the device name) when set; else a discrete
// GPU, then an integrated one, then any other (Mesa's lavapipe, a CPU device, is what CI has).
// Only devices that can run engine arithmetic v2 are candidates (docs/design/arithmetic.md):
// Vulkan 1.2, and f32 round-to-nearest-even and inf/NaN/signed-zero preservation on request
// (float controls), which every shader declares; others are refused with the reason.
#pragma once
#include <vulkan/vulkan.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

namespace stoa::gpu::vulkan {

struct DeviceInfo {
  std::string name;
  std::string driver;  // driverName / driverInfo where the device reports them
  uint32_t vendor_id = 0;
  uint32_t device_id = 0;
  uint32_t api_version = 0;
  VkPhysicalDeviceType type = VK_PHYSICAL_DEVICE_TYPE_OTHER;
  // What arithmetic v2 needs to be checked on (docs/design/arithmetic.md): round-to-nearest-even
  // declarable, and whether denormals may be flushed (v2 does not depend on it either way).
  bool rounding_rte_f32 = false;
  bool inf_nan_preserve_f32 = false;  // shaderSignedZeroInfNanPreserveFloat32
  bool denorm_flush_f32 = false;
  bool denorm_preserve_f32 = false;
  // Unified memory: the device computes on the host's memory (an integrated GPU, a CPU device
  // such as lavapipe), and it imports host pages as device memory (VK_EXT_external_memory_host)
  // whose start and size are multiples of import_alignment. Then the engine's weights exist
  // once (docs/design/gpu.md, "Memory"); a discrete GPU mirrors them.
  bool unified_memory = false;
  bool imports_host_memory = false;
  size_t import_alignment = 0;  // minImportedHostPointerAlignment
};

// A storage buffer: in host-visible, host-coherent memory, written and read through a mapping
// (on unified memory that is device memory); or, from make_device_buffer on a discrete GPU, in
// memory only the device reaches (data() is null: Context::write stages what the host writes).
class Buffer {
 public:
  Buffer() = default;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  Buffer(Buffer&& other) noexcept;
  Buffer& operator=(Buffer&& other) noexcept;
  ~Buffer();

  VkBuffer handle() const { return buffer_; }
  size_t size() const { return size_; }
  void* data() const { return mapped_; }
  // Host memory imported in place (Context::import_host), not an allocation of its own.
  bool imported() const { return imported_; }

 private:
  friend class Context;
  void release();
  VkDevice device_ = VK_NULL_HANDLE;
  VkBuffer buffer_ = VK_NULL_HANDLE;
  VkDeviceMemory memory_ = VK_NULL_HANDLE;
  void* mapped_ = nullptr;
  size_t size_ = 0;
  bool imported_ = false;
};

class Context {
 public:
  // The device, or null with `why_not` saying why in plain words (no loader, no device, none
  // that can run arithmetic v2 and why not, no compute queue, no host-visible memory).
  static std::unique_ptr<Context> create(std::string* why_not);
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  const DeviceInfo& info() const { return info_; }
  VkDevice device() const { return device_; }

  // A storage buffer of `bytes` (at least 4), mapped. Throws std::runtime_error on failure.
  Buffer make_buffer(size_t bytes);
  // A storage buffer for what every pass reads whole (the weights): in memory only the device
  // reaches where it has such (a discrete GPU's VRAM, unmapped), else as make_buffer.
  Buffer make_device_buffer(size_t bytes);
  // Host bytes into `dst` at `offset`: through the mapping, or staged (a host-visible buffer of
  // at most staging_bytes() and a copy on the device, piece by piece) where `dst` is unmapped.
  void write(const Buffer& dst, size_t offset, const void* src, size_t bytes);
  size_t staging_bytes() const { return staging_bytes_; }
  static constexpr size_t kStagingBytes = size_t{64} << 20;
  // Tests: make_device_buffer leaves buffers unmapped even where every memory type is
  // host-visible (lavapipe), so the staged writes a discrete GPU needs run there too, in
  // pieces of `piece` bytes (small: many pieces per tensor).
  void force_staged_device_buffers(bool on, size_t piece = kStagingBytes) {
    stage_device_buffers_ = on;
    staging_bytes_ = on ? std::max<size_t>(piece, 1) : kStagingBytes;
  }
  // A storage buffer that is `bytes` of host memory at `host` itself, not a copy (the device
  // reads what the host writes, at the next submission). Only where info().imports_host_memory;
  // host and bytes multiples of info().import_alignment, the memory alive and in place for as
  // long as the buffer. Throws std::runtime_error when the driver refuses.
  Buffer import_host(void* host, size_t bytes);
  // Records with `record` into a fresh command buffer, submits it and waits for it.
  template <class Record>
  void submit_and_wait(Record record) {
    VkCommandBuffer cmd = begin_commands();
    try {
      record(cmd);
    } catch (...) {
      abandon_commands(cmd);
      throw;
    }
    end_and_wait(cmd);
  }
  // The two halves of submit_and_wait, for a recorder that fills one command buffer with a whole
  // pass (gpu/vulkan/pass_recorder.h). end_and_wait frees the command buffer. The command pool
  // and the queue are the device's one each, so a recording holds the device from begin to end:
  // another thread's begin_commands waits (a worker's generation and a replay may share it).
  VkCommandBuffer begin_commands();
  void end_and_wait(VkCommandBuffer cmd);
  // Drops a recording that will not be submitted (frees it, lets the next one begin).
  void abandon_commands(VkCommandBuffer cmd);

 private:
  Context() = default;

  DeviceInfo info_;
  VkInstance instance_ = VK_NULL_HANDLE;
  VkPhysicalDevice physical_ = VK_NULL_HANDLE;
  VkDevice device_ = VK_NULL_HANDLE;
  VkQueue queue_ = VK_NULL_HANDLE;
  uint32_t queue_family_ = 0;
  uint32_t memory_type_ = 0;
  uint32_t device_local_type_ = UINT32_MAX;  // device-local, not host-visible (none: unified)
  bool stage_device_buffers_ = false;
  size_t staging_bytes_ = kStagingBytes;
  Buffer allocate(size_t bytes, uint32_t type, bool map);
  PFN_vkGetMemoryHostPointerPropertiesEXT host_pointer_properties_ = nullptr;
  VkCommandPool pool_ = VK_NULL_HANDLE;
  VkFence fence_ = VK_NULL_HANDLE;
  std::mutex recording_;  // held from begin_commands to end_and_wait / abandon_commands
};

// Throws std::runtime_error naming `what` when result is not VK_SUCCESS.
void check(VkResult result, const char* what);

}  // namespace stoa::gpu::vulkan
