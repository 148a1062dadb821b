#include "gpu/vulkan/arith_check.h"

#include <cstring>
#include <stdexcept>

#include "gpu/vulkan/v2_elementwise_spv.h"  // generated at build time: kV2ElementwiseSpirv
#include "gpu/vulkan/v2_rows_spv.h"         // kV2RowsSpirv

namespace stoa::gpu::vulkan {
namespace {

constexpr uint32_t kLocalSize = 64;  // shaders/v2_elementwise.comp's local_size_x

struct Params {
  uint32_t n, op;
};

struct RowParams {
  uint32_t n, op, eps_bits, has_weight;
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

// Bindings: x, w, y (shaders/v2_rows.comp).
V2Rows::V2Rows(Context& ctx)
    : ctx_(ctx), kernel_(ctx, kV2RowsSpirv, sizeof(kV2RowsSpirv), 3, sizeof(RowParams)) {}

std::vector<uint32_t> V2Rows::softmax(const std::vector<float>& x, uint32_t n) {
  return run(0, x, {}, n, 0.0f);
}

std::vector<uint32_t> V2Rows::rmsnorm(const std::vector<float>& x, const std::vector<float>& weight,
                                      uint32_t n, float eps) {
  return run(1, x, weight, n, eps);
}

std::vector<uint32_t> V2Rows::run(uint32_t op, const std::vector<float>& x,
                                  const std::vector<float>& weight, uint32_t n, float eps) {
  if (n == 0 || x.size() % n != 0 || (!weight.empty() && weight.size() != n))
    throw std::invalid_argument("V2Rows: x must hold whole rows of n, the weight one row");
  const size_t bytes = x.size() * sizeof(float);
  Buffer in = ctx_.make_buffer(bytes);
  Buffer w = ctx_.make_buffer(weight.size() * sizeof(float));
  Buffer out = ctx_.make_buffer(bytes);
  std::memcpy(in.data(), x.data(), bytes);
  if (!weight.empty()) std::memcpy(w.data(), weight.data(), weight.size() * sizeof(float));
  uint32_t eps_bits = 0;
  std::memcpy(&eps_bits, &eps, sizeof eps_bits);
  const RowParams params{n, op, eps_bits, weight.empty() ? 0u : 1u};
  kernel_.dispatch({&in, &w, &out}, &params, static_cast<uint32_t>(x.size() / n));
  std::vector<uint32_t> bits(x.size());
  std::memcpy(bits.data(), out.data(), bytes);
  return bits;
}

}  // namespace stoa::gpu::vulkan
