// Engine arithmetic v2's primitives run on the device (shaders/v2_elementwise.comp and
// v2_rows.comp, on the GLSL of shaders/arith_v2.glsl): what a device's conformance to the formula
// is checked with, against kernels::v2 on the host (issue 54's golden self-test will build on it).
#pragma once
#include <cstdint>
#include <vector>

#include "gpu/vulkan/context.h"
#include "gpu/vulkan/kernel.h"
#include "gpu/vulkan/pass_recorder.h"

namespace stoa::gpu::vulkan {

// In kernels::v2's order; the shader's `op` push constant.
enum class V2Op : uint32_t { kFlush, kRecip, kDivide, kRsqrt, kExp, kSigmoid, kSilu };

// The host's kernels::v2 for op (b read by kDivide only): what the device must equal.
float v2_on_host(V2Op op, float a, float b);

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

// softmax_row and rmsnorm_row (shaders/v2_rows.comp: one workgroup of 32 per row, the spec's
// fixed 32-lane sum and tree), over `rows` rows of n values stored one after another.
class V2Rows {
 public:
  explicit V2Rows(Context& ctx);
  // kernels::v2::softmax_row on each row; returns the f32 bits.
  std::vector<uint32_t> softmax(const std::vector<float>& x, uint32_t n);
  // kernels::v2::rmsnorm_row on each row with one weight row (empty: none) and eps.
  std::vector<uint32_t> rmsnorm(const std::vector<float>& x, const std::vector<float>& weight,
                                uint32_t n, float eps);
  // The same in a pass: `rows` rows of n from x to out, scaled by weight (n values).
  void record_rmsnorm(PassRecorder& pass, const Buffer& x, const Buffer& weight, const Buffer& out,
                      uint32_t rows, uint32_t n, float eps);

 private:
  std::vector<uint32_t> run(uint32_t op, const std::vector<float>& x,
                            const std::vector<float>& weight, uint32_t n, float eps);
  Context& ctx_;
  Kernel kernel_;
};

// kernels::v2::attention_head for `queries` query rows of head_dim values against one set of
// n_keys keys and values (rows k_stride / v_stride apart), shaders/v2_attention.comp: one
// workgroup of 32 per query. Returns the outputs [queries][head_dim] and the probabilities
// [queries][n_keys], as f32 bits.
// shaders/v2_attention.comp's push constants (its comments say what each is).
struct V2AttentionParams {
  uint32_t head_dim, heads, group, first_keys, causal, q_base, q_stride, kv_base, k_stride,
      v_stride, p_stride, scale_bits;
};

class V2Attention {
 public:
  explicit V2Attention(Context& ctx);
  struct Result {
    std::vector<uint32_t> out, probabilities;
  };
  Result run(const std::vector<float>& q, const std::vector<float>& k, const std::vector<float>& v,
             uint32_t n_keys, uint32_t head_dim, uint32_t k_stride, uint32_t v_stride, float scale);
  // In a pass: `workgroups` = tokens x params.heads, probabilities p_stride floats apart.
  void record(PassRecorder& pass, const Buffer& q, const Buffer& k, const Buffer& v,
              const Buffer& probabilities, const Buffer& out, const V2AttentionParams& params,
              uint32_t workgroups);

 private:
  Context& ctx_;
  Kernel kernel_;
};

// The rest of a pass (shaders/v2_pass_ops.comp; kernels::v2::add, silu_mul, rope_apply,
// short_conv_step's output, moe_mix), one output value per invocation. Inputs by op: kAdd a + b;
// kSiluMul silu(a) * b; kRope a the heads (n values, heads of `param` = head_dim), b cos, c sin;
// kShortConv a the kernel [n][param], b the window [param - 1][n], c bx; kMoeMix d + weight * a.
enum class V2PassOp : uint32_t { kAdd, kSiluMul, kRope, kShortConv, kMoeMix };

class V2PassOps {
 public:
  explicit V2PassOps(Context& ctx);
  std::vector<uint32_t> run(V2PassOp op, uint32_t n, uint32_t param, float weight,
                            const std::vector<float>& a, const std::vector<float>& b,
                            const std::vector<float>& c, const std::vector<float>& d);
  // In a pass; `row` is kRope's values per token (each token its own cos/sin row; 0: one row).
  void record(PassRecorder& pass, V2PassOp op, uint32_t n, uint32_t param, uint32_t row,
              float weight, const Buffer& a, const Buffer& b, const Buffer& c, const Buffer& d,
              const Buffer& out);

 private:
  Context& ctx_;
  Kernel kernel_;
};

}  // namespace stoa::gpu::vulkan
