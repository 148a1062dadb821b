// Engine arithmetic v2's Q8_0 x Q8_0 matvec on a Vulkan device (shaders/q8_matvec.comp), bit for
// bit kernels::v2::matvec_q8. The first compute kernel of the Vulkan backend (issue 54).
#pragma once
#include <cstdint>

#include "gpu/vulkan/context.h"
#include "gpu/vulkan/kernel.h"
#include "gpu/vulkan/pass_recorder.h"
#include "kernels/matmul_int8.h"

namespace stoa::gpu::vulkan {

// An int8-grid matrix held by the device (values four to a word, f16 scales two to a word).
struct DeviceQ8Matrix {
  Buffer values;
  Buffer scales;
  int64_t rows = 0;
  int64_t cols = 0;
};

class Q8Matvec {
 public:
  // Builds the pipeline from the SPIR-V embedded at build time. Throws std::runtime_error.
  explicit Q8Matvec(Context& ctx);

  // Copies w (cols a positive multiple of 32) into device buffers.
  DeviceQ8Matrix upload(const kernels::Int8Weights& w);
  // y[b * y_stride + o] for every o < m.rows, b < acts.batch: uploads the activations,
  // dispatches, waits and reads back. acts.cols must equal m.cols.
  void run(const DeviceQ8Matrix& m, const kernels::Q8Activations& acts, float* y, int64_t y_stride);
  // In a pass: y[b * y_stride + o] from activations already on the device (Q8Quantize::record's
  // q and d) for first_row <= b < first_row + batch.
  void record(PassRecorder& pass, const DeviceQ8Matrix& m, const Buffer& xq, const Buffer& xd,
              const Buffer& y, uint32_t batch, uint32_t y_stride, uint32_t first_row = 0);

 private:
  Context& ctx_;
  Kernel kernel_;
};

}  // namespace stoa::gpu::vulkan
