// The Vulkan tests' fixture: one device for the whole binary (whichever the loader offers: a GPU
// first, Mesa's lavapipe in CI), its description printed once, and a skip with the reason only
// when the machine has no Vulkan device at all (scripts/test fails a release run on any skip,
// so CI must have one: scripts/setup installs mesa-vulkan-drivers).
#pragma once
#include <gtest/gtest.h>

#include <cstdio>
#include <memory>
#include <string>

#include "gpu/vulkan/context.h"

namespace stoa::gpu::vulkan {

class VulkanDeviceTest : public ::testing::Test {
 protected:
  // Opened at the first test and closed when the process exits (the driver's own memory is
  // released then, which leak checkers see).
  static Context* device() {
    static const std::unique_ptr<Context> ctx(open_device());
    return ctx.get();
  }
  static const std::string& why_not() {
    static std::string why;
    return why;
  }
  void SetUp() override {
    if (device() == nullptr) GTEST_SKIP() << "no Vulkan device, nothing to compare: " << why_not();
  }

 private:
  static Context* open_device() {
    std::string why;
    Context* ctx = Context::create(&why).release();
    if (ctx == nullptr) {
      const_cast<std::string&>(why_not()) = why;
      return nullptr;
    }
    const DeviceInfo& d = ctx->info();
    std::printf(
        "vulkan device: %s (%s), vendor 0x%04x, api %u.%u; float controls f32: RTE %d, inf/nan "
        "preserve %d, denorm flush %d, denorm preserve %d\n",
        d.name.c_str(), d.driver.c_str(), d.vendor_id, VK_API_VERSION_MAJOR(d.api_version),
        VK_API_VERSION_MINOR(d.api_version), d.rounding_rte_f32, d.inf_nan_preserve_f32,
        d.denorm_flush_f32, d.denorm_preserve_f32);
    return ctx;
  }
};

}  // namespace stoa::gpu::vulkan
