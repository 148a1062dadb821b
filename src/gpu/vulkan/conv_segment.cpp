#include "gpu/vulkan/conv_segment.h"

#include "gpu/vulkan/v2_conv_segment_spv.h"  // generated at build time: kV2ConvSegmentSpirv

namespace stoa::gpu::vulkan {
namespace {

constexpr uint32_t kLocalSize = 64;  // shaders/v2_conv_segment.comp's local_size_x

struct Params {
  uint32_t hidden, kernel_size, first_token, count, state_base;
};

}  // namespace

// Bindings: bcx, kernel, state, out.
ConvSegment::ConvSegment(Context& ctx)
    : kernel_(ctx, kV2ConvSegmentSpirv, sizeof(kV2ConvSegmentSpirv), 4, sizeof(Params)) {}

void ConvSegment::record(PassRecorder& pass, const Buffer& bcx, const Buffer& kernel,
                         const Buffer& state, const Buffer& out, uint32_t hidden,
                         uint32_t kernel_size, uint32_t first_token, uint32_t count,
                         uint32_t state_base) {
  const Params params{hidden, kernel_size, first_token, count, state_base};
  pass.dispatch(kernel_, {&bcx, &kernel, &state, &out}, &params,
                (hidden + kLocalSize - 1) / kLocalSize);
}

}  // namespace stoa::gpu::vulkan
