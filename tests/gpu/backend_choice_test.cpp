// The backend choice every role makes (gpu/engine_backend_choice.h): cpu is the CPU engine;
// vulkan is the Vulkan backend after the golden self-test (whole passes of the three
// architectures against the CPU engine's bits), or an error in words; auto never takes a CPU
// device such as lavapipe, and says why in its one line.
#include "gpu/engine_backend_choice.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "core/error.h"
#include "engine/engine_test_util.h"
#include "gpu/vulkan/golden_passes.h"
#include "gpu/vulkan_device.h"
#include "support/error_of.h"

namespace stoa::gpu {
namespace {

using engine::EngineWeights;
using engine::WeightFormat;

std::unique_ptr<EngineWeights> weights(const char* preset, WeightFormat format) {
  return std::make_unique<EngineWeights>(
      EngineWeights::from_model(engine::testing::tiny_model(preset), format));
}

TEST(BackendChoice, NamesParseAndAnUnknownOneIsRefusedWithTheChoices) {
  EXPECT_EQ(parse_backend_choice("auto"), BackendChoice::kAuto);
  EXPECT_EQ(parse_backend_choice("cpu"), BackendChoice::kCpu);
  EXPECT_EQ(parse_backend_choice("vulkan"), BackendChoice::kVulkan);
  const std::string why = test::message_of([] { parse_backend_choice("cuda"); });
  EXPECT_NE(why.find("auto, cpu or vulkan"), std::string::npos) << why;
}

TEST(BackendChoice, CpuIsTheCpuEngine) {
  ChosenBackend chosen =
      make_engine_backend(BackendChoice::kCpu, weights("tiny-qwen3", WeightFormat::kInt8));
  EXPECT_STREQ(chosen.backend->backend_name(), "cpu");
  EXPECT_NE(chosen.note.find("CPU"), std::string::npos);
}

class BackendChoiceOnDevice : public vulkan::VulkanDeviceTest {};

TEST_F(BackendChoiceOnDevice, VulkanPassesTheGoldenSelfTestAndAutoLeavesACpuDeviceAlone) {
  const vulkan::SelfTestResult golden = vulkan::run_golden_passes(
      std::shared_ptr<vulkan::Context>(device(), [](vulkan::Context*) {}));
  EXPECT_TRUE(golden.passed) << golden.report;

  ChosenBackend chosen =
      make_engine_backend(BackendChoice::kVulkan, weights("tiny-lfm2moe", WeightFormat::kInt8));
  EXPECT_STREQ(chosen.backend->backend_name(), "vulkan");
  EXPECT_NE(chosen.note.find("bit for bit"), std::string::npos) << chosen.note;

  ChosenBackend automatic =
      make_engine_backend(BackendChoice::kAuto, weights("tiny-qwen3", WeightFormat::kInt8));
  if (device()->info().type == VK_PHYSICAL_DEVICE_TYPE_CPU) {
    EXPECT_STREQ(automatic.backend->backend_name(), "cpu");
    EXPECT_NE(automatic.note.find("runs on the CPU"), std::string::npos) << automatic.note;
  } else {
    EXPECT_STREQ(automatic.backend->backend_name(), "vulkan") << automatic.note;
  }
}

TEST_F(BackendChoiceOnDevice, WeightsTheDeviceCannotComputeAreRefusedOrLeftToTheCpu) {
  // f32 weights: vulkan refuses in words, auto computes them on the CPU.
  const Error refused = test::error_of([] {
    make_engine_backend(BackendChoice::kVulkan, weights("tiny-qwen3", WeightFormat::kF32));
  });
  EXPECT_EQ(refused.kind(), ErrorKind::kUnsupported);
  EXPECT_NE(std::string(refused.what()).find("int8"), std::string::npos) << refused.what();
  ChosenBackend fallback =
      make_engine_backend(BackendChoice::kAuto, weights("tiny-qwen3", WeightFormat::kF32));
  EXPECT_STREQ(fallback.backend->backend_name(), "cpu");
}

}  // namespace
}  // namespace stoa::gpu
