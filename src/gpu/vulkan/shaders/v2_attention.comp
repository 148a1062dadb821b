// Engine arithmetic v2's attention, one query head of one token per workgroup
// (kernels::v2::attention_head; docs/design/arithmetic.md): the scores by the fixed-order dot
// product (invocation j takes keys j, j + 32, ...; each dot keeps its own 32 partial sums and
// tree), softmax over the scores in place (v2_row_ops.glsl), then each output value summed over
// the keys in order. A dispatch covers `tokens x heads` workgroups: the tokens of one sequence's
// segment in a pass (causal: token i sees first_keys + i keys, its own included, since the
// segment's keys are in the cache before it attends), or, with causal 0, query rows that all see
// the same first_keys keys (the kernel test's form).
#version 450
#extension GL_GOOGLE_include_directive : require

#include "arith_v2.glsl"

layout(local_size_x = 32, local_size_y = 1, local_size_z = 1) in;

// All f32 bits. Queries: token i's head h at q_base + i * q_stride + h * head_dim (its output at
// the same place in o); key t of KV head g at kv_base + g * head_dim + t * k_stride (values with
// v_stride); the probabilities of workgroup w at w * p_stride (scratch, returned).
layout(std430, set = 0, binding = 0) readonly buffer Queries { uint q[]; };
layout(std430, set = 0, binding = 1) readonly buffer Keys { uint k[]; };
layout(std430, set = 0, binding = 2) readonly buffer Values { uint v[]; };
layout(std430, set = 0, binding = 3) coherent buffer Probabilities { uint v2_row[]; };
layout(std430, set = 0, binding = 4) writeonly buffer Outputs { uint o[]; };

layout(push_constant) uniform Params {
  uint head_dim;
  uint heads;       // query heads per token
  uint group;       // query heads per KV head
  uint first_keys;  // keys the dispatch's first token sees
  uint causal;      // 1: token i sees first_keys + i keys; 0: every token first_keys
  uint q_base;
  uint q_stride;
  uint kv_base;
  uint k_stride;
  uint v_stride;
  uint p_stride;
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
  const uint token = gl_WorkGroupID.x / params.heads;
  const uint head = gl_WorkGroupID.x % params.heads;
  const uint j = gl_LocalInvocationID.x;
  const uint n = params.first_keys + (params.causal != 0u ? token : 0u);
  const uint p_base = gl_WorkGroupID.x * params.p_stride;
  const uint q_row = params.q_base + token * params.q_stride + head * params.head_dim;
  const uint kv_head = params.kv_base + (head / params.group) * params.head_dim;
  const float scale = uintBitsToFloat(params.scale_bits);
  for (uint t = j; t < n; t += 32u) {
    precise float scaled = dot_qk(q_row, kv_head + t * params.k_stride) * scale;
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
                           v2_flush(uintBitsToFloat(v[kv_head + t * params.v_stride + d]));
      precise float next = acc + v2_flush_summand(term);
      acc = next;
    }
    o[q_row + d] = floatBitsToUint(v2_flush(acc));
  }
}
