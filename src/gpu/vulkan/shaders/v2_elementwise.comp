// Applies one of engine arithmetic v2's element-wise primitives (arith_v2.glsl) to every
// element: the shader the conformance test checks against the scalar reference bit for bit.
#version 450
#extension GL_GOOGLE_include_directive : require

#include "arith_v2.glsl"

layout(local_size_x = 64, local_size_y = 1, local_size_z = 1) in;

// Inputs and outputs as f32 bits: no driver may touch a NaN or denormal on load or store.
layout(std430, set = 0, binding = 0) readonly buffer InputA { uint a[]; };
layout(std430, set = 0, binding = 1) readonly buffer InputB { uint b[]; };
layout(std430, set = 0, binding = 2) writeonly buffer Output { uint y[]; };

layout(push_constant) uniform Params {
  uint n;
  uint op;  // kernels::v2 order: 0 flush, 1 recip, 2 divide, 3 rsqrt, 4 exp, 5 sigmoid, 6 silu
} params;

void main() {
  const uint i = gl_GlobalInvocationID.x;
  if (i >= params.n) return;
  const float x = uintBitsToFloat(a[i]);
  float r;
  switch (params.op) {
    case 0u: r = v2_flush(x); break;
    case 1u: r = v2_recip(x); break;
    case 2u: r = v2_divide(x, uintBitsToFloat(b[i])); break;
    case 3u: r = v2_rsqrt(x); break;
    case 4u: r = v2_exp(x); break;
    case 5u: r = v2_sigmoid(x); break;
    default: r = v2_silu(x); break;
  }
  y[i] = floatBitsToUint(r);
}
