#include "gpu/vulkan/q8_quantize.h"

#include <cstring>
#include <stdexcept>

#include "gpu/vulkan/q8_quantize_spv.h"  // generated at build time: kQ8QuantizeSpirv

namespace stoa::gpu::vulkan {
namespace {

constexpr uint32_t kLocalSize = 64;  // shaders/q8_quantize.comp's local_size_x

struct Params {
  uint32_t blocks;
};

}  // namespace

// Bindings: x, q, d, sums (shaders/q8_quantize.comp).
Q8Quantize::Q8Quantize(Context& ctx)
    : ctx_(ctx), kernel_(ctx, kQ8QuantizeSpirv, sizeof(kQ8QuantizeSpirv), 4, sizeof(Params)) {}

void Q8Quantize::run(const float* x, int64_t x_stride, const kernels::Q8Activations& acts) {
  if (acts.cols <= 0 || acts.cols % kernels::kQ8Block != 0 || acts.batch <= 0)
    throw std::invalid_argument("Q8Quantize::run: cols must be a positive multiple of 32");
  const size_t values = static_cast<size_t>(acts.batch * acts.cols);
  const size_t blocks = values / kernels::kQ8Block;
  Buffer in = ctx_.make_buffer(values * sizeof(float));
  Buffer q = ctx_.make_buffer(values);
  Buffer d = ctx_.make_buffer(blocks * sizeof(float));
  Buffer sums = ctx_.make_buffer(blocks * sizeof(int32_t));
  for (int64_t b = 0; b < acts.batch; ++b)
    std::memcpy(static_cast<float*>(in.data()) + b * acts.cols, x + b * x_stride,
                static_cast<size_t>(acts.cols) * sizeof(float));
  const Params params{static_cast<uint32_t>(blocks)};
  kernel_.dispatch({&in, &q, &d, &sums}, &params,
                   static_cast<uint32_t>((blocks + kLocalSize - 1) / kLocalSize));
  std::memcpy(acts.values, q.data(), values);
  std::memcpy(acts.scales, d.data(), blocks * sizeof(float));
  if (acts.sums != nullptr) std::memcpy(acts.sums, sums.data(), blocks * sizeof(int32_t));
}

void Q8Quantize::record(PassRecorder& pass, const Buffer& x, const Buffer& q, const Buffer& d,
                        const Buffer& sums, uint32_t blocks) {
  const Params params{blocks};
  pass.dispatch(kernel_, {&x, &q, &d, &sums}, &params, (blocks + kLocalSize - 1) / kLocalSize);
}

}  // namespace stoa::gpu::vulkan
