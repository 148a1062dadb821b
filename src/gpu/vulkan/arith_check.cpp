#include "gpu/vulkan/arith_check.h"

#include <cstring>
#include <stdexcept>

#include "kernels/arith_v2.h"

#include "gpu/vulkan/v2_attention_spv.h"  // kV2AttentionSpirv
#include "gpu/vulkan/v2_elementwise_spv.h"
#include "gpu/vulkan/v2_pass_ops_spv.h"  // kV2PassOpsSpirv  // generated at build time: kV2ElementwiseSpirv
#include "gpu/vulkan/v2_rows_spv.h"  // kV2RowsSpirv

namespace stoa::gpu::vulkan {
namespace {

constexpr uint32_t kLocalSize = 64;  // v2_elementwise.comp's and v2_pass_ops.comp's local_size_x

struct Params {
  uint32_t n, op;
};

struct RowParams {
  uint32_t n, op, eps_bits, has_weight;
};

struct PassParams {
  uint32_t op, n, param, w_bits, row;
};

// A buffer holding a copy of v (at least 4 bytes).
Buffer upload(Context& ctx, const std::vector<float>& v) {
  Buffer b = ctx.make_buffer(v.size() * sizeof(float));
  if (!v.empty()) std::memcpy(b.data(), v.data(), v.size() * sizeof(float));
  return b;
}

std::vector<uint32_t> download(const Buffer& b, size_t count) {
  std::vector<uint32_t> bits(count);
  std::memcpy(bits.data(), b.data(), count * sizeof(uint32_t));
  return bits;
}

}  // namespace

float v2_on_host(V2Op op, float a, float b) {
  switch (op) {
    case V2Op::kFlush:
      return kernels::v2::flush(a);
    case V2Op::kRecip:
      return kernels::v2::recip(a);
    case V2Op::kDivide:
      return kernels::v2::divide(a, b);
    case V2Op::kRsqrt:
      return kernels::v2::rsqrt(a);
    case V2Op::kExp:
      return kernels::v2::exp(a);
    case V2Op::kSigmoid:
      return kernels::v2::sigmoid(a);
    case V2Op::kSilu:
      return kernels::v2::silu(a);
  }
  return 0.0f;
}

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

void V2Rows::record_rmsnorm(PassRecorder& pass, const Buffer& x, const Buffer& weight,
                            const Buffer& out, uint32_t rows, uint32_t n, float eps) {
  uint32_t eps_bits = 0;
  std::memcpy(&eps_bits, &eps, sizeof eps_bits);
  const RowParams params{n, 1u, eps_bits, 1u};
  pass.dispatch(kernel_, {&x, &weight, &out}, &params, rows);
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

// Bindings: q, k, v, probabilities, out (shaders/v2_attention.comp).
V2Attention::V2Attention(Context& ctx)
    : ctx_(ctx),
      kernel_(ctx, kV2AttentionSpirv, sizeof(kV2AttentionSpirv), 5, sizeof(V2AttentionParams)) {}

V2Attention::Result V2Attention::run(const std::vector<float>& q, const std::vector<float>& k,
                                     const std::vector<float>& v, uint32_t n_keys,
                                     uint32_t head_dim, uint32_t k_stride, uint32_t v_stride,
                                     float scale) {
  if (n_keys == 0 || head_dim == 0 || q.size() % head_dim != 0 ||
      k.size() < static_cast<size_t>(n_keys - 1) * k_stride + head_dim ||
      v.size() < static_cast<size_t>(n_keys - 1) * v_stride + head_dim)
    throw std::invalid_argument("V2Attention: the shapes do not match");
  const size_t queries = q.size() / head_dim;
  Buffer bq = upload(ctx_, q), bk = upload(ctx_, k), bv = upload(ctx_, v);
  Buffer probabilities = ctx_.make_buffer(queries * n_keys * sizeof(float));
  Buffer out = ctx_.make_buffer(q.size() * sizeof(float));
  uint32_t scale_bits = 0;
  std::memcpy(&scale_bits, &scale, sizeof scale_bits);
  // Every query row sees the same keys: one "token" of `queries` heads sharing KV head 0.
  const auto heads = static_cast<uint32_t>(queries);
  const V2AttentionParams params{head_dim,         heads, heads,    n_keys,   0u,     0u,
                                 heads * head_dim, 0u,    k_stride, v_stride, n_keys, scale_bits};
  kernel_.dispatch({&bq, &bk, &bv, &probabilities, &out}, &params, static_cast<uint32_t>(queries));
  return {download(out, q.size()), download(probabilities, queries * n_keys)};
}

void V2Attention::record(PassRecorder& pass, const Buffer& q, const Buffer& k, const Buffer& v,
                         const Buffer& probabilities, const Buffer& out,
                         const V2AttentionParams& params, uint32_t workgroups) {
  pass.dispatch(kernel_, {&q, &k, &v, &probabilities, &out}, &params, workgroups);
}

// Bindings: a, b, c, d, out (shaders/v2_pass_ops.comp).
V2PassOps::V2PassOps(Context& ctx)
    : ctx_(ctx), kernel_(ctx, kV2PassOpsSpirv, sizeof(kV2PassOpsSpirv), 5, sizeof(PassParams)) {}

std::vector<uint32_t> V2PassOps::run(V2PassOp op, uint32_t n, uint32_t param, float weight,
                                     const std::vector<float>& a, const std::vector<float>& b,
                                     const std::vector<float>& c, const std::vector<float>& d) {
  Buffer ba = upload(ctx_, a), bb = upload(ctx_, b), bc = upload(ctx_, c), bd = upload(ctx_, d);
  Buffer out = ctx_.make_buffer(static_cast<size_t>(n) * sizeof(float));
  uint32_t w_bits = 0;
  std::memcpy(&w_bits, &weight, sizeof w_bits);
  const PassParams params{static_cast<uint32_t>(op), n, param, w_bits, 0u};
  kernel_.dispatch({&ba, &bb, &bc, &bd, &out}, &params, (n + kLocalSize - 1) / kLocalSize);
  return download(out, n);
}

void V2PassOps::record(PassRecorder& pass, V2PassOp op, uint32_t n, uint32_t param, uint32_t row,
                       float weight, const Buffer& a, const Buffer& b, const Buffer& c,
                       const Buffer& d, const Buffer& out) {
  uint32_t w_bits = 0;
  std::memcpy(&w_bits, &weight, sizeof w_bits);
  const PassParams params{static_cast<uint32_t>(op), n, param, w_bits, row};
  pass.dispatch(kernel_, {&a, &b, &c, &d, &out}, &params, (n + kLocalSize - 1) / kLocalSize);
}

}  // namespace stoa::gpu::vulkan
