#include "gpu/engine_backend_choice.h"

#include <map>
#include <mutex>

#include "core/error.h"
#include "engine/model_runner.h"

#ifdef STOA_HAVE_VULKAN
#include "gpu/vulkan/golden_passes.h"
#include "gpu/vulkan/vulkan_backend.h"
#endif

namespace stoa::gpu {
namespace {

std::unique_ptr<engine::EngineBackend> cpu_engine(std::unique_ptr<engine::EngineWeights> weights,
                                                  ThreadPool* pool) {
  return std::make_unique<engine::ModelRunner>(std::move(weights), pool);
}

#ifdef STOA_HAVE_VULKAN
// The device, and its self-test once it is to be used, once per process: a worker that
// re-creates its engine (an anchor after a failure) does not test the device again.
struct Device {
  std::mutex mutex;
  bool opened = false;
  std::shared_ptr<vulkan::Context> ctx;
  std::string why_not;  // set: not usable
  bool tested = false;
  std::string report;  // the self-test's words
};

Device& device() {
  static Device d;
  return d;
}

// Opens the device (why_not says why it cannot be); with `test`, runs its self-test too.
void prepare(Device& d, bool test) {
  if (!d.opened) {
    d.opened = true;
    std::string why;
    d.ctx = vulkan::Context::create(&why);
    if (!d.ctx) d.why_not = why;
  }
  if (test && d.ctx && !d.tested) {
    d.tested = true;
    const vulkan::SelfTestResult result = vulkan::run_golden_passes(d.ctx);
    d.report = result.report;
    if (!result.passed) d.why_not = cat("the device failed its self-test: ", result.report);
  }
}
#endif

}  // namespace

BackendChoice parse_backend_choice(const std::string& name) {
  if (name == "auto") return BackendChoice::kAuto;
  if (name == "cpu") return BackendChoice::kCpu;
  if (name == "vulkan") return BackendChoice::kVulkan;
  fail(ErrorKind::kInvalidArgument, "unknown backend '", name, "' (auto, cpu or vulkan)");
}

const char* backend_choice_name(BackendChoice choice) {
  switch (choice) {
    case BackendChoice::kAuto:
      return "auto";
    case BackendChoice::kCpu:
      return "cpu";
    case BackendChoice::kVulkan:
      return "vulkan";
  }
  return "?";
}

bool vulkan_built() {
#ifdef STOA_HAVE_VULKAN
  return true;
#else
  return false;
#endif
}

void require_backend(BackendChoice choice) {
  if (choice != BackendChoice::kVulkan) return;
#ifdef STOA_HAVE_VULKAN
  Device& d = device();
  const std::lock_guard lock(d.mutex);
  prepare(d, true);
  STOA_CHECK(d.why_not.empty(), ErrorKind::kUnsupported, "--backend vulkan: ", d.why_not);
#else
  fail(ErrorKind::kUnsupported,
       "--backend vulkan: this build has no Vulkan backend (built without the Vulkan headers or "
       "glslc)");
#endif
}

ChosenBackend make_engine_backend(BackendChoice choice,
                                  std::unique_ptr<engine::EngineWeights> weights,
                                  ThreadPool* pool) {
  if (choice == BackendChoice::kCpu)
    return {cpu_engine(std::move(weights), pool), "computing on the CPU (--backend cpu)"};
#ifdef STOA_HAVE_VULKAN
  Device& d = device();
  const std::lock_guard lock(d.mutex);
  prepare(d, false);
  std::string why_not = d.why_not;
  if (why_not.empty() && choice == BackendChoice::kAuto &&
      d.ctx->info().type == VK_PHYSICAL_DEVICE_TYPE_CPU)
    why_not = cat("the only Vulkan device, ", d.ctx->info().name,
                  ", runs on the CPU (--backend vulkan uses it anyway)");
  if (why_not.empty()) why_not = vulkan::VulkanBackend::unsupported(*weights);
  if (why_not.empty()) {
    prepare(d, true);
    why_not = d.why_not;
  }
  if (why_not.empty()) {
    try {
      auto backend = std::make_unique<vulkan::VulkanBackend>(d.ctx, std::move(weights));
      return {std::move(backend),
              cat("computing on ", d.ctx->info().name, " (Vulkan; ", d.report, ")")};
    } catch (const std::exception& e) {
      // The backend hands the weights back when it fails (out of device memory, a lost
      // device): auto computes on the CPU with them, vulkan says why not.
      if (!weights) throw;
      why_not =
          cat("the Vulkan backend could not be built on ", d.ctx->info().name, ": ", e.what());
    }
  }
  STOA_CHECK(choice == BackendChoice::kAuto, ErrorKind::kUnsupported,
             "--backend vulkan: ", why_not);
  return {cpu_engine(std::move(weights), pool), cat("computing on the CPU: ", why_not)};
#else
  STOA_CHECK(choice == BackendChoice::kAuto, ErrorKind::kUnsupported,
             "--backend vulkan: this build has no Vulkan backend (built without the Vulkan "
             "headers or glslc)");
  return {cpu_engine(std::move(weights), pool), "computing on the CPU (built without Vulkan)"};
#endif
}

}  // namespace stoa::gpu
