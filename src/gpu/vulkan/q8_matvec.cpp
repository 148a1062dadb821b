#include "gpu/vulkan/q8_matvec.h"

#include <cstring>
#include <stdexcept>

#include "gpu/vulkan/q8_matvec_spv.h"  // generated at build time: kQ8MatvecSpirv

namespace stoa::gpu::vulkan {
namespace {

constexpr uint32_t kLocalSize = 64;  // shaders/q8_matvec.comp's local_size_x

struct Shape {
  uint32_t rows, cols, batch, y_stride, first_row;
};

}  // namespace

// Bindings: wq, ws, xq, xd, y (shaders/q8_matvec.comp).
Q8Matvec::Q8Matvec(Context& ctx)
    : ctx_(ctx), kernel_(ctx, kQ8MatvecSpirv, sizeof(kQ8MatvecSpirv), 5, sizeof(Shape)) {}

DeviceQ8Matrix Q8Matvec::upload(const kernels::Int8Weights& w) {
  if (w.cols <= 0 || w.cols % kernels::kQ8Block != 0 || w.rows <= 0)
    throw std::invalid_argument("Q8Matvec::upload: cols must be a positive multiple of 32");
  DeviceQ8Matrix m;
  m.rows = w.rows;
  m.cols = w.cols;
  const size_t value_bytes = static_cast<size_t>(w.rows * w.cols);
  const size_t scale_count = static_cast<size_t>(w.rows * (w.cols / kernels::kQ8Block));
  m.values = ctx_.make_buffer(value_bytes);
  m.scales = ctx_.make_buffer((scale_count + 1) / 2 * 4);  // whole words
  // Bytes in memory order are the shader's little-endian bytes of each word (Vulkan hosts are
  // little endian: x86, ARM).
  std::memcpy(m.values.data(), w.values, value_bytes);
  std::memset(m.scales.data(), 0, m.scales.size());
  std::memcpy(m.scales.data(), w.scales, scale_count * sizeof(uint16_t));
  return m;
}

void Q8Matvec::run(const DeviceQ8Matrix& m, const kernels::Q8Activations& acts, float* y,
                   int64_t y_stride) {
  if (acts.cols != m.cols || acts.batch <= 0 || y_stride < m.rows)
    throw std::invalid_argument("Q8Matvec::run: activations or output do not match the matrix");
  const int64_t groups = m.cols / kernels::kQ8Block;
  Buffer xq = ctx_.make_buffer(static_cast<size_t>(acts.batch * acts.cols));
  Buffer xd = ctx_.make_buffer(static_cast<size_t>(acts.batch * groups) * sizeof(float));
  Buffer out =
      ctx_.make_buffer(static_cast<size_t>((acts.batch - 1) * y_stride + m.rows) * sizeof(float));
  std::memcpy(xq.data(), acts.values, static_cast<size_t>(acts.batch * acts.cols));
  std::memcpy(xd.data(), acts.scales, static_cast<size_t>(acts.batch * groups) * sizeof(float));
  const Shape shape{static_cast<uint32_t>(m.rows), static_cast<uint32_t>(m.cols),
                    static_cast<uint32_t>(acts.batch), static_cast<uint32_t>(y_stride), 0u};
  kernel_.dispatch({&m.values, &m.scales, &xq, &xd, &out}, &shape,
                   static_cast<uint32_t>((m.rows + kLocalSize - 1) / kLocalSize),
                   static_cast<uint32_t>(acts.batch));
  const float* result = static_cast<const float*>(out.data());
  for (int64_t b = 0; b < acts.batch; ++b)
    std::memcpy(y + b * y_stride, result + b * y_stride,
                static_cast<size_t>(m.rows) * sizeof(float));
}

void Q8Matvec::record(PassRecorder& pass, const DeviceQ8Matrix& m, const Buffer& xq,
                      const Buffer& xd, const Buffer& y, uint32_t batch, uint32_t y_stride,
                      uint32_t first_row) {
  const Shape shape{static_cast<uint32_t>(m.rows), static_cast<uint32_t>(m.cols), batch, y_stride,
                    first_row};
  pass.dispatch(kernel_, {&m.values, &m.scales, &xq, &xd, &y}, &shape,
                static_cast<uint32_t>((m.rows + kLocalSize - 1) / kLocalSize), batch);
}

}  // namespace stoa::gpu::vulkan
