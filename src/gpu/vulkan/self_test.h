// The device's self-test for engine arithmetic v2 (issue 54, item 4, first part): every v2
// kernel this backend has run on fixed inputs and compared bit for bit with kernels::v2 on the
// host. A device that fails it must not compute rollouts. The full golden self-test (whole
// passes against digests the CPU engine computes) needs the engine on v2 and comes with it.
#pragma once
#include <string>

#include "gpu/vulkan/context.h"

namespace stoa::gpu::vulkan {

struct SelfTestResult {
  bool passed = false;
  // One line in plain words: what was checked on which device, or the first difference found.
  std::string report;
};

// Runs every element-wise primitive on 2^16 + specials inputs, softmax and RMSNorm rows,
// attention, and a quantise-then-matvec chain; never throws (a Vulkan error is a failed
// self-test).
SelfTestResult run_v2_self_test(Context& ctx);

}  // namespace stoa::gpu::vulkan
