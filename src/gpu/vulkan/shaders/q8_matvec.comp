// Engine arithmetic v2's Q8_0 x Q8_0 matvec (docs/design/arithmetic.md, "Q8_0 x Q8_0 matvec";
// the reference is kernels::v2::matvec_q8). One invocation per (output row, activation row): the
// v2 formula is one chain over the blocks in order, so one output is never split across
// invocations (no split-K). Every float operation is `precise` (SPIR-V NoContraction): the driver
// may not fuse `acc + isum * scale` into an fma.
#version 450
#extension GL_GOOGLE_include_directive : require

#include "arith_v2.glsl"

layout(local_size_x = 64, local_size_y = 1, local_size_z = 1) in;

// Int8 values four to a word (little-endian bytes), f16 scales two to a word, the activation
// scales as f32 bits, the outputs as f32 bits (stored as uint so that no driver touches a NaN).
layout(std430, set = 0, binding = 0) readonly buffer WeightValues { uint wq[]; };
layout(std430, set = 0, binding = 1) readonly buffer WeightScales { uint ws[]; };
layout(std430, set = 0, binding = 2) readonly buffer ActValues { uint xq[]; };
layout(std430, set = 0, binding = 3) readonly buffer ActScales { uint xd[]; };
layout(std430, set = 0, binding = 4) writeonly buffer Outputs { uint y[]; };

layout(push_constant) uniform Shape {
  uint rows;      // output rows of W
  uint cols;      // a multiple of 32
  uint batch;     // activation rows
  uint y_stride;  // in floats, between activation rows of y
  uint first_row; // the dispatch's activation rows (and rows of y) start here (MoE: an expert's)
} shape;

// The exact dot product of four int8 pairs (sign-extended bytes).
int dot4(uint a, uint b) {
  int s = 0;
  for (int k = 0; k < 32; k += 8) s += bitfieldExtract(int(a), k, 8) * bitfieldExtract(int(b), k, 8);
  return s;
}

void main() {
  const uint o = gl_GlobalInvocationID.x;
  if (o >= shape.rows || gl_GlobalInvocationID.y >= shape.batch) return;
  const uint b = shape.first_row + gl_GlobalInvocationID.y;
  const uint groups = shape.cols / 32u;
  const uint words = shape.cols / 4u;
  precise float acc = 0.0;
  for (uint g = 0u; g < groups; ++g) {
    // |isum| <= 32 * 128 * 127 < 2^24: exact in int32 and in its float conversion.
    int isum = 0;
    for (uint k = 0u; k < 8u; ++k)
      isum += dot4(wq[o * words + g * 8u + k], xq[b * words + g * 8u + k]);
    const uint si = o * groups + g;
    const float dw = v2_f16_to_f32((ws[si >> 1] >> ((si & 1u) * 16u)) & 0xffffu);
    precise float scale = dw * uintBitsToFloat(xd[b * groups + g]);  // exact (11-bit significands)
    precise float term = float(isum) * scale;
    acc = acc + term;
  }
  // The spec's special values: canonical NaN, and the tiny flush to +0.
  uint u = floatBitsToUint(acc);
  const uint mag = u & 0x7fffffffu;
  if (mag > 0x7f800000u) u = 0x7fc00000u;
  else if (mag <= 0x00800000u) u = 0u;
  y[b * shape.y_stride + o] = u;
}
