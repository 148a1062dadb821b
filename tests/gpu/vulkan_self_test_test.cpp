// The device self-test (gpu/vulkan/self_test.h) passes on this machine's Vulkan device and says
// so in words; a failure's report names the kernel, the input and both results.
#include "gpu/vulkan/self_test.h"

#include <gtest/gtest.h>

#include <cstdio>

#include "gpu/vulkan_device.h"

namespace stoa::gpu::vulkan {
namespace {

class VulkanSelfTest : public VulkanDeviceTest {};

TEST_F(VulkanSelfTest, PassesOnThisDevice) {
  const SelfTestResult result = run_v2_self_test(*device());
  std::printf("%s\n", result.report.c_str());
  EXPECT_TRUE(result.passed) << result.report;
  EXPECT_NE(result.report.find(device()->info().name), std::string::npos);
}

}  // namespace
}  // namespace stoa::gpu::vulkan
