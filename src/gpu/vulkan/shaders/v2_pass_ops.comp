// Engine arithmetic v2's remaining pass operations (kernels/arith_v2_ops.cpp), one output value
// per invocation, selected by `op`: the residual add, SwiGLU, RoPE, LFM2's short convolution (its
// output; the window shift is a copy) and the MoE mixing step.
#version 450
#extension GL_GOOGLE_include_directive : require

#include "arith_v2.glsl"

layout(local_size_x = 64, local_size_y = 1, local_size_z = 1) in;

// f32 bits. add: a + b; silu_mul: silu(a) * b; rope: a the heads, b cos, c sin; short conv: a
// the kernel [n][kernel_size], b the window [kernel_size - 1][n], c bx; moe_mix: d + w * a.
layout(std430, set = 0, binding = 0) readonly buffer A { uint a[]; };
layout(std430, set = 0, binding = 1) readonly buffer B { uint b[]; };
layout(std430, set = 0, binding = 2) readonly buffer C { uint c[]; };
layout(std430, set = 0, binding = 3) readonly buffer D { uint d[]; };
layout(std430, set = 0, binding = 4) writeonly buffer Out { uint o[]; };

layout(push_constant) uniform Params {
  uint op;     // 0 add, 1 silu_mul, 2 rope, 3 short conv, 4 moe_mix
  uint n;      // outputs (rope: all heads' values; short conv: hidden)
  uint param;  // rope: head_dim; short conv: kernel_size
  uint w_bits; // moe_mix: the expert's weight
  uint row;    // rope: values per token, each token with its own cos/sin row (0: one row for all)
} params;

float f(uint bits) { return uintBitsToFloat(bits); }

float rope(uint i) {
  const uint head_dim = params.param, half_dim = head_dim / 2u;
  const uint base = (i / head_dim) * head_dim, k = i % head_dim, p = k % half_dim;
  const uint angle = (params.row == 0u ? 0u : i / params.row) * half_dim + p;
  const float cs = v2_flush(f(b[angle])), sn = v2_flush(f(c[angle]));
  const float x1 = v2_flush(f(a[base + p])), x2 = v2_flush(f(a[base + p + half_dim]));
  if (k < half_dim) {
    precise float p1 = x1 * cs;
    precise float p2 = x2 * sn;
    precise float r = v2_flush_summand(p1) - v2_flush_summand(p2);
    return v2_flush(r);
  }
  precise float p1 = x2 * cs;
  precise float p2 = x1 * sn;
  precise float r = v2_flush_summand(p1) + v2_flush_summand(p2);
  return v2_flush(r);
}

float short_conv(uint h) {
  const uint L = params.param, n = params.n;
  precise float acc = 0.0;
  for (uint j = 0u; j + 1u < L; ++j) {
    precise float prod = v2_flush(f(a[h * L + j])) * v2_flush(f(b[j * n + h]));
    precise float next = acc + v2_flush_summand(prod);
    acc = next;
  }
  precise float last = v2_flush(f(a[h * L + L - 1u])) * v2_flush(f(c[h]));
  precise float sum = acc + v2_flush_summand(last);
  return v2_flush(sum);
}

void main() {
  const uint i = gl_GlobalInvocationID.x;
  if (i >= params.n) return;
  float r;
  if (params.op == 0u) {
    precise float s = v2_flush_summand(f(a[i])) + v2_flush_summand(f(b[i]));
    r = v2_flush(s);
  } else if (params.op == 1u) {
    precise float p = v2_silu(f(a[i])) * v2_flush(f(b[i]));
    r = v2_flush(p);
  } else if (params.op == 2u) {
    r = rope(i);
  } else if (params.op == 3u) {
    r = short_conv(i);
  } else {
    precise float p = v2_flush(f(params.w_bits)) * v2_flush(f(a[i]));
    precise float s = f(d[i]) + v2_flush_summand(p);
    r = v2_flush(s);
  }
  o[i] = floatBitsToUint(r);
}
