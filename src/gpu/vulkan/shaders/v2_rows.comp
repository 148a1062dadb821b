// Engine arithmetic v2's row operations (docs/design/arithmetic.md): softmax_row and rmsnorm_row,
// one workgroup of 32 invocations per row. Invocation j owns partial sum j (the values i with
// i mod 32 = j, added in index order), and the 32 partials are reduced by the spec's tree
// s[j] += s[j + w], w = 16, 8, 4, 2, 1, in shared memory with a barrier per level: the same sum
// as kernels::v2's fixed_sum, never a subgroup operation (those have no defined order).
#version 450
#extension GL_GOOGLE_include_directive : require

#include "arith_v2.glsl"

layout(local_size_x = 32, local_size_y = 1, local_size_z = 1) in;

// Rows of f32 bits, row r at r * n; the RMSNorm weight (n values) when has_weight is set.
layout(std430, set = 0, binding = 0) readonly buffer Input { uint x[]; };
layout(std430, set = 0, binding = 1) readonly buffer Weight { uint w[]; };
layout(std430, set = 0, binding = 2) buffer Output { uint y[]; };

layout(push_constant) uniform Params {
  uint n;
  uint op;          // 0 softmax_row, 1 rmsnorm_row
  uint eps_bits;    // RMSNorm's eps as f32 bits
  uint has_weight;  // RMSNorm: scale by w
} params;

shared float partial[32];
shared float row_max[32];
shared uint row_nan[32];

// The fixed tree over partial[] (every invocation calls it; the result is partial[0]).
float tree_sum(uint j) {
  for (uint width = 16u; width >= 1u; width /= 2u) {
    barrier();
    if (j < width) {
      precise float s = partial[j] + partial[j + width];
      partial[j] = s;
    }
  }
  barrier();
  return partial[0];
}

void softmax_row(uint base, uint j) {
  const uint n = params.n;
  float mx = uintBitsToFloat(0xff800000u);  // -inf
  uint nan = 0u;
  for (uint i = j; i < n; i += 32u) {
    const float v = v2_flush(uintBitsToFloat(x[base + i]));
    if (v2_is_nan_bits(floatBitsToUint(v))) nan = 1u;
    else if (v > mx) mx = v;  // exact in any order
  }
  row_max[j] = mx;
  row_nan[j] = nan;
  for (uint width = 16u; width >= 1u; width /= 2u) {
    barrier();
    if (j < width) {
      row_max[j] = max(row_max[j], row_max[j + width]);  // neither is NaN
      row_nan[j] = row_nan[j] | row_nan[j + width];
    }
  }
  barrier();
  mx = row_max[0];
  // No finite maximum (a NaN, all -inf, or a +inf): the row is NaN.
  if (row_nan[0] != 0u || (floatBitsToUint(mx) & V2_ABS) >= V2_INF) {
    for (uint i = j; i < n; i += 32u) y[base + i] = V2_NAN;
    return;
  }
  precise float s = 0.0;
  for (uint i = j; i < n; i += 32u) {
    precise float shifted = v2_flush(uintBitsToFloat(x[base + i])) - mx;
    const float e = v2_exp(shifted);
    y[base + i] = floatBitsToUint(e);
    precise float next = s + e;
    s = next;
  }
  partial[j] = s;
  const float inv = v2_recip(tree_sum(j));
  for (uint i = j; i < n; i += 32u) {
    precise float p = uintBitsToFloat(y[base + i]) * inv;
    y[base + i] = floatBitsToUint(v2_flush(p));
  }
}

void rmsnorm_row(uint base, uint j) {
  const uint n = params.n;
  precise float s = 0.0;
  for (uint i = j; i < n; i += 32u) {
    const float v = v2_flush(uintBitsToFloat(x[base + i]));
    precise float sq = v * v;
    precise float next = s + v2_flush(sq);
    s = next;
  }
  partial[j] = s;
  const float ss = tree_sum(j);
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
    y[base + i] = floatBitsToUint(out_v);
  }
}

void main() {
  const uint row = gl_WorkGroupID.x;
  const uint j = gl_LocalInvocationID.x;
  if (params.op == 0u) softmax_row(row * params.n, j);
  else rmsnorm_row(row * params.n, j);
}
