// Engine arithmetic v2's element-wise primitives run on the device (shaders/v2_elementwise.comp,
// the GLSL of shaders/arith_v2.glsl): what a device's conformance to the formula is checked with,
// against kernels::v2 on the host (the golden self-test of issue 54 will build on it).
#pragma once
#include <cstdint>
#include <vector>

#include "gpu/vulkan/context.h"
#include "gpu/vulkan/kernel.h"

namespace stoa::gpu::vulkan {

// In kernels::v2's order; the shader's `op` push constant.
enum class V2Op : uint32_t { kFlush, kRecip, kDivide, kRsqrt, kExp, kSigmoid, kSilu };

class V2Elementwise {
 public:
  explicit V2Elementwise(Context& ctx);
  // op applied to every a[i] (kDivide: a[i] / b[i]; b is ignored otherwise and may be empty),
  // as f32 bits.
  std::vector<uint32_t> run(V2Op op, const std::vector<float>& a, const std::vector<float>& b);

 private:
  Context& ctx_;
  Kernel kernel_;
};

}  // namespace stoa::gpu::vulkan
