// Which backend computes a role's passes (issue 54 item 5): `--backend auto|cpu|vulkan`.
//   cpu     the CPU engine (ModelRunner);
//   vulkan  the Vulkan backend on the device Context::create picks (STOA_VULKAN_DEVICE names
//           one), after the golden self-test (gpu/vulkan/golden_passes.h); a build without it,
//           no device, a failed self-test or a model it has no pass for is an error in words;
//   auto    the Vulkan backend on a GPU that passes the self-test, else the CPU engine, saying
//           which and why in one line. A CPU device (Mesa's lavapipe) is never chosen by auto:
//           it computes the same bits as the CPU engine, only slower.
// The self-test runs once per process per device.
#pragma once
#include <memory>
#include <string>

#include "core/thread_pool.h"
#include "engine/backend.h"
#include "engine/engine_weights.h"

namespace stoa::gpu {

enum class BackendChoice { kAuto, kCpu, kVulkan };

// "auto" | "cpu" | "vulkan"; kInvalidArgument naming the choices otherwise.
BackendChoice parse_backend_choice(const std::string& name);
const char* backend_choice_name(BackendChoice choice);

struct ChosenBackend {
  std::unique_ptr<engine::EngineBackend> backend;
  // One line for the operator or volunteer: what computes, and why not the other.
  std::string note;
};

// The backend for `weights` under `choice` (`pool`: the CPU engine's threads; may be null for
// the global pool). Throws kUnsupported (words) when kVulkan cannot be had.
ChosenBackend make_engine_backend(BackendChoice choice,
                                  std::unique_ptr<engine::EngineWeights> weights,
                                  ThreadPool* pool = nullptr);

// Throws kUnsupported (words) when `choice` is kVulkan and no device can be had (no device, a
// failed self-test, a build without Vulkan): what a role checks at start, before it depends on
// the backend (the hub's replay makes its engines only when the first rollout comes).
void require_backend(BackendChoice choice);

// Whether this build has the Vulkan backend at all.
bool vulkan_built();

}  // namespace stoa::gpu
