// LFM2's gated short convolution on a Vulkan device (shaders/v2_conv_segment.comp), bit for bit
// engine/short_conv.cpp's: one dispatch per sequence segment of a pass, its conv state updated in
// place in device memory.
#pragma once
#include <cstdint>

#include "gpu/vulkan/context.h"
#include "gpu/vulkan/kernel.h"
#include "gpu/vulkan/pass_recorder.h"

namespace stoa::gpu::vulkan {

class ConvSegment {
 public:
  explicit ConvSegment(Context& ctx);
  // Tokens [first_token, first_token + count) of bcx ([tokens][3 * hidden]: B, C, x) through the
  // conv with `kernel` ([hidden][kernel_size]) and the window at float state_base of `state`,
  // into out ([tokens][hidden]).
  void record(PassRecorder& pass, const Buffer& bcx, const Buffer& kernel, const Buffer& state,
              const Buffer& out, uint32_t hidden, uint32_t kernel_size, uint32_t first_token,
              uint32_t count, uint32_t state_base);

 private:
  Kernel kernel_;
};

}  // namespace stoa::gpu::vulkan
