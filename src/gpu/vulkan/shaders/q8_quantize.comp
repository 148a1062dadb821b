// Engine arithmetic v2's W8A8 activation quantisation (docs/design/arithmetic.md; the reference
// is kernels::v2::quantize_q8): one invocation per 32-block. amax on the bits, the scale as one
// rounded product with fl(1/127), its f16 rounding by integer arithmetic (and one float add of
// normal operands for f16 subnormals, as kernels/half.h), the values by v2's reciprocal and an exact
// round-half-away.
#version 450
#extension GL_GOOGLE_include_directive : require

#include "arith_v2.glsl"

layout(local_size_x = 64, local_size_y = 1, local_size_z = 1) in;

layout(std430, set = 0, binding = 0) readonly buffer Input { uint x[]; };  // f32 bits
layout(std430, set = 0, binding = 1) writeonly buffer Values { uint q[]; };  // int8, 4 a word
layout(std430, set = 0, binding = 2) writeonly buffer Scales { uint d[]; };  // f32 bits
layout(std430, set = 0, binding = 3) writeonly buffer Sums { int sums[]; };

layout(push_constant) uniform Params {
  uint blocks;  // batch * cols / 32
} params;

int round_half_away(float t) {
  const float mag = uintBitsToFloat(floatBitsToUint(t) & V2_ABS);
  int v = int(mag);  // truncation: exact
  precise float frac = mag - float(v);
  if (frac >= 0.5) v += 1;
  v = min(v, 127);
  return (floatBitsToUint(t) >> 31) != 0u ? -v : v;
}

void main() {
  const uint blk = gl_GlobalInvocationID.x;
  if (blk >= params.blocks) return;
  const uint base = blk * 32u;
  uint amax_bits = 0u;
  for (uint i = 0u; i < 32u; ++i)
    amax_bits = max(amax_bits, floatBitsToUint(v2_flush(uintBitsToFloat(x[base + i]))) & V2_ABS);
  if (amax_bits >= V2_INF) {  // a NaN or an infinity: scale NaN, values 0
    for (uint k = 0u; k < 8u; ++k) q[blk * 8u + k] = 0u;
    d[blk] = V2_NAN;
    sums[blk] = 0;
    return;
  }
  precise float dd_raw = uintBitsToFloat(amax_bits) * uintBitsToFloat(0x3c010204u);  // fl(1/127)
  const float dd = v2_flush(dd_raw);
  d[blk] = floatBitsToUint(v2_f16_to_f32(v2_f32_to_f16_bits(dd)));
  const float id = dd != 0.0 ? v2_recip(dd) : 0.0;
  int sum = 0;
  for (uint k = 0u; k < 8u; ++k) {
    uint word = 0u;
    for (uint b = 0u; b < 4u; ++b) {
      precise float t = v2_flush(uintBitsToFloat(x[base + k * 4u + b])) * id;
      const int v = round_half_away(v2_flush(t));
      word |= (uint(v) & 0xffu) << (8u * b);
      sum += v;
    }
    q[blk * 8u + k] = word;
  }
  sums[blk] = sum;
}
