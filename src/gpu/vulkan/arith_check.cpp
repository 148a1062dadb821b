#include "gpu/vulkan/arith_check.h"

#include <cstring>
#include <stdexcept>

#include "gpu/vulkan/v2_elementwise_spv.h"  // generated at build time: kV2ElementwiseSpirv

namespace stoa::gpu::vulkan {
namespace {

constexpr uint32_t kLocalSize = 64;  // shaders/v2_elementwise.comp's local_size_x

struct Params {
  uint32_t n, op;
};

}  // namespace

// Bindings: a, b, y (shaders/v2_elementwise.comp).
V2Elementwise::V2Elementwise(Context& ctx)
    : ctx_(ctx),
      kernel_(ctx, kV2ElementwiseSpirv, sizeof(kV2ElementwiseSpirv), 3, sizeof(Params)) {}

std::vector<uint32_t> V2Elementwise::run(V2Op op, const std::vector<float>& a,
                                         const std::vector<float>& b) {
  if (op == V2Op::kDivide && b.size() != a.size())
    throw std::invalid_argument("V2Elementwise::run: divide needs one b per a");
  const size_t bytes = a.size() * sizeof(float);
  Buffer in_a = ctx_.make_buffer(bytes);
  Buffer in_b = ctx_.make_buffer(op == V2Op::kDivide ? bytes : 4);
  Buffer out = ctx_.make_buffer(bytes);
  std::memcpy(in_a.data(), a.data(), bytes);
  if (op == V2Op::kDivide) std::memcpy(in_b.data(), b.data(), bytes);
  const Params params{static_cast<uint32_t>(a.size()), static_cast<uint32_t>(op)};
  kernel_.dispatch({&in_a, &in_b, &out}, &params,
                   static_cast<uint32_t>((a.size() + kLocalSize - 1) / kLocalSize));
  std::vector<uint32_t> bits(a.size());
  std::memcpy(bits.data(), out.data(), bytes);
  return bits;
}

}  // namespace stoa::gpu::vulkan
