// Engine arithmetic v2's W8A8 activation quantisation on a Vulkan device
// (shaders/q8_quantize.comp), bit for bit kernels::v2::quantize_q8: what a pass runs before each
// Q8 matvec (gpu/vulkan/q8_matvec.h).
#pragma once
#include <cstdint>

#include "gpu/vulkan/context.h"
#include "gpu/vulkan/kernel.h"
#include "gpu/vulkan/pass_recorder.h"
#include "kernels/matmul_int8.h"

namespace stoa::gpu::vulkan {

class Q8Quantize {
 public:
  explicit Q8Quantize(Context& ctx);
  // Quantises x[b * x_stride + i] (b < acts.batch, i < acts.cols, cols a multiple of 32) into
  // acts (and acts.sums when not null), as kernels::v2::quantize_q8 does.
  void run(const float* x, int64_t x_stride, const kernels::Q8Activations& acts);
  // In a pass: `blocks` 32-blocks of x (rows back to back) into q (four values a word), d (f32
  // scales) and sums.
  void record(PassRecorder& pass, const Buffer& x, const Buffer& q, const Buffer& d,
              const Buffer& sums, uint32_t blocks);

 private:
  Context& ctx_;
  Kernel kernel_;
};

}  // namespace stoa::gpu::vulkan
