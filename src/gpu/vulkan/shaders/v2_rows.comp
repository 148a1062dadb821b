// Engine arithmetic v2's row operations (docs/design/arithmetic.md): softmax_row and rmsnorm_row,
// one workgroup of 32 invocations per row, the sums in the spec's fixed order (v2_row_ops.glsl).
#version 450
#extension GL_GOOGLE_include_directive : require

#include "arith_v2.glsl"

layout(local_size_x = 32, local_size_y = 1, local_size_z = 1) in;

// Rows of f32 bits, row r at r * n; the RMSNorm weight (n values) when has_weight is set.
layout(std430, set = 0, binding = 0) readonly buffer Input { uint x[]; };
layout(std430, set = 0, binding = 1) readonly buffer Weight { uint w[]; };
layout(std430, set = 0, binding = 2) buffer Output { uint v2_row[]; };

layout(push_constant) uniform Params {
  uint n;
  uint op;          // 0 softmax_row, 1 rmsnorm_row
  uint eps_bits;    // RMSNorm's eps as f32 bits
  uint has_weight;  // RMSNorm: scale by w
} params;

#include "v2_row_ops.glsl"

void rmsnorm_row(uint base, uint j) {
  const uint n = params.n;
  precise float s = 0.0;
  for (uint i = j; i < n; i += 32u) {
    const float v = v2_flush(uintBitsToFloat(x[base + i]));
    precise float sq = v * v;
    precise float next = s + v2_flush(sq);
    s = next;
  }
  v2_partial[j] = s;
  const float ss = v2_tree_sum(j);
  precise float mean_raw = ss * v2_recip(float(n));  // 1/n: the reference's recip, n < 2^24
  precise float t = v2_flush(mean_raw) + uintBitsToFloat(params.eps_bits);
  const float r = v2_rsqrt(t);
  for (uint i = j; i < n; i += 32u) {
    precise float scaled = v2_flush(uintBitsToFloat(x[base + i])) * r;
    float out_v = v2_flush(scaled);
    if (params.has_weight != 0u) {
      precise float weighted = out_v * uintBitsToFloat(w[i]);
      out_v = v2_flush(weighted);
    }
    v2_row[base + i] = floatBitsToUint(out_v);
  }
}

void main() {
  const uint row = gl_WorkGroupID.x;
  const uint j = gl_LocalInvocationID.x;
  const uint base = row * params.n;
  if (params.op == 0u) {
    for (uint i = j; i < params.n; i += 32u) v2_row[base + i] = x[base + i];
    v2_softmax_inplace(base, params.n, j);
  } else {
    rmsnorm_row(base, j);
  }
}
