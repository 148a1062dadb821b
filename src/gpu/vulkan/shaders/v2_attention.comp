// Engine arithmetic v2's attention for one query per workgroup (kernels::v2::attention_head;
// docs/design/arithmetic.md): the scores by the fixed-order dot product (invocation j takes keys
// j, j + 32, ...; each dot keeps its own 32 partial sums and tree), softmax over the scores in
// place (v2_row_ops.glsl), then each output value summed over the keys in order.
#version 450
#extension GL_GOOGLE_include_directive : require

#include "arith_v2.glsl"

layout(local_size_x = 32, local_size_y = 1, local_size_z = 1) in;

// All f32 bits. Queries [queries][head_dim]; keys and values [n_keys] rows k_stride / v_stride
// apart, shared by every query (as a KV head is by its query heads); the probabilities
// [queries][n_keys] (scratch, returned); the outputs [queries][head_dim].
layout(std430, set = 0, binding = 0) readonly buffer Queries { uint q[]; };
layout(std430, set = 0, binding = 1) readonly buffer Keys { uint k[]; };
layout(std430, set = 0, binding = 2) readonly buffer Values { uint v[]; };
layout(std430, set = 0, binding = 3) coherent buffer Probabilities { uint v2_row[]; };
layout(std430, set = 0, binding = 4) writeonly buffer Outputs { uint o[]; };

layout(push_constant) uniform Params {
  uint n_keys;
  uint head_dim;
  uint k_stride;
  uint v_stride;
  uint scale_bits;
} params;

#include "v2_row_ops.glsl"

// kernels::v2::dot of the query row and key row t, by one invocation.
float dot_qk(uint q_base, uint k_base) {
  float s[32];
  for (uint l = 0u; l < 32u; ++l) s[l] = 0.0;
  for (uint i = 0u; i < params.head_dim; ++i) {
    precise float prod = v2_flush(uintBitsToFloat(q[q_base + i])) *
                         v2_flush(uintBitsToFloat(k[k_base + i]));
    precise float next = s[i % 32u] + v2_flush_summand(prod);
    s[i % 32u] = next;
  }
  for (uint width = 16u; width >= 1u; width /= 2u)
    for (uint l = 0u; l < width; ++l) {
      precise float sum = s[l] + s[l + width];
      s[l] = sum;
    }
  return v2_flush(s[0]);
}

void main() {
  const uint query = gl_WorkGroupID.x;
  const uint j = gl_LocalInvocationID.x;
  const uint n = params.n_keys;
  const uint p_base = query * n;
  const float scale = uintBitsToFloat(params.scale_bits);
  for (uint t = j; t < n; t += 32u) {
    precise float scaled = dot_qk(query * params.head_dim, t * params.k_stride) * scale;
    v2_row[p_base + t] = floatBitsToUint(v2_flush(scaled));
  }
  // Softmax starts with each invocation on its own scores (the same t = j mod 32 as above).
  v2_softmax_inplace(p_base, n, j);
  // Every probability is read by every invocation below: make the others' writes visible.
  memoryBarrierBuffer();
  barrier();
  for (uint d = j; d < params.head_dim; d += 32u) {
    precise float acc = 0.0;
    for (uint t = 0u; t < n; ++t) {
      precise float term = uintBitsToFloat(v2_row[p_base + t]) *
                           v2_flush(uintBitsToFloat(v[t * params.v_stride + d]));
      precise float next = acc + v2_flush_summand(term);
      acc = next;
    }
    o[query * params.head_dim + d] = floatBitsToUint(v2_flush(acc));
  }
}
