// LFM2's gated short convolution over one sequence's tokens in a pass, in engine arithmetic v2
// (engine/short_conv.cpp; kernels::v2::short_conv_step and mul_flush): one invocation per
// channel walks the segment's tokens in order, each step reading the window the step before left
// (the sequence's conv state, [L - 1][hidden], oldest first), then shifting it.
//   bx = flush(flush(B) * flush(x));  y = conv(window, bx);  out = flush(flush(y) * flush(C))
#version 450
#extension GL_GOOGLE_include_directive : require

#include "arith_v2.glsl"

layout(local_size_x = 64, local_size_y = 1, local_size_z = 1) in;

// All f32 bits. in_proj's output [tokens][3 * hidden] (B, C, x); the kernel [hidden][L]; the
// sequence's conv state of this layer at state_base; the outputs [tokens][hidden].
layout(std430, set = 0, binding = 0) readonly buffer Bcx { uint bcx[]; };
layout(std430, set = 0, binding = 1) readonly buffer Kernel { uint kernel[]; };
layout(std430, set = 0, binding = 2) buffer State { uint state[]; };
layout(std430, set = 0, binding = 3) writeonly buffer Out { uint o[]; };

layout(push_constant) uniform Params {
  uint hidden;
  uint kernel_size;  // L >= 1
  uint first_token;  // the segment's first token in the pass
  uint count;        // its tokens
  uint state_base;   // floats: the layer's window in `state`
} params;

float f(uint bits) { return uintBitsToFloat(bits); }

float mul_flush(float a, float b) {
  precise float p = v2_flush(a) * v2_flush(b);
  return v2_flush(p);
}

void main() {
  const uint h = gl_GlobalInvocationID.x;
  const uint H = params.hidden, L = params.kernel_size;
  if (h >= H) return;
  for (uint i = 0u; i < params.count; ++i) {
    const uint row = (params.first_token + i) * 3u * H;
    const float bx = mul_flush(f(bcx[row + h]), f(bcx[row + 2u * H + h]));
    precise float acc = 0.0;
    for (uint j = 0u; j + 1u < L; ++j) {
      precise float prod = v2_flush(f(kernel[h * L + j])) * v2_flush(f(state[params.state_base + j * H + h]));
      precise float next = acc + v2_flush_summand(prod);
      acc = next;
    }
    precise float last = v2_flush(f(kernel[h * L + L - 1u])) * v2_flush(bx);
    precise float sum = acc + v2_flush_summand(last);
    const float y = v2_flush(sum);
    // The window shifts; only this invocation touches channel h.
    for (uint j = 0u; j + 2u < L; ++j)
      state[params.state_base + j * H + h] = state[params.state_base + (j + 1u) * H + h];
    if (L > 1u) state[params.state_base + (L - 2u) * H + h] = floatBitsToUint(bx);
    o[(params.first_token + i) * H + h] = floatBitsToUint(mul_flush(y, f(bcx[row + H + h])));
  }
}
