// The device's golden self-test (issue 54 item 4): before a Vulkan device takes work, whole
// forward passes of the three architectures run on it and on the CPU engine and must agree bit
// for bit (the CPU engine's logits are the digests: it is the reference every rollout is checked
// against). The kernels' own self-test (self_test.h) runs first, so a failure names the kernel
// where it can. A device that fails is refused in plain words and the worker computes on the CPU.
#pragma once
#include <memory>
#include <string>

#include "gpu/vulkan/context.h"
#include "gpu/vulkan/self_test.h"

namespace stoa::gpu::vulkan {

// Runs the kernels' self-test, then for tiny Qwen3, LFM2 and LFM2-MoE models (fixed seeds) a
// prefill of every row, a batch mixing a fork's decode with another sequence's resumed turn,
// and a decode step of all; compares every logit's bits. Never throws (an error is a failure,
// its words the report). About a second on lavapipe.
SelfTestResult run_golden_passes(const std::shared_ptr<Context>& ctx);

}  // namespace stoa::gpu::vulkan
