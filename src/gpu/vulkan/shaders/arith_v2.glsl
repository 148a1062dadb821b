// Engine arithmetic v2's element-wise primitives in GLSL (docs/design/arithmetic.md), the same
// sequence of operations as the scalar reference src/kernels/arith_v2.cpp, line for line.
// Every float result lands in a `precise` variable before it is used or returned, so that every
// float operation carries SPIR-V NoContraction (glslang marks the operations that compute a
// precise variable; a bare `return a * b + c;` would not be). Constants are given by their bits:
// no decimal-to-float conversion by a compiler is trusted. Special values are tested on the bits.
//
// Every shader that includes this file declares, for 32-bit floats, round to nearest even
// (RoundingModeRTE: capability 4467, execution mode 4462) and IEEE infinities, NaNs and signed
// zeros (SignedZeroInfNanPreserve: 4466, 4461) — without the latter a driver may assume no inf
// arises, yet exp overflows to +inf and silu divides by it. Context refuses a device that cannot
// honour both (gpu/vulkan/context.h).
#extension GL_EXT_spirv_intrinsics : require
spirv_execution_mode(capabilities = [4467], 4462, 32);
spirv_execution_mode(capabilities = [4466], 4461, 32);

const uint V2_ABS = 0x7fffffffu;
const uint V2_SIGN = 0x80000000u;
const uint V2_INF = 0x7f800000u;
const uint V2_MIN_NORMAL = 0x00800000u;  // 2^-126
const uint V2_NAN = 0x7fc00000u;         // the canonical NaN

bool v2_is_nan_bits(uint u) { return (u & V2_ABS) > V2_INF; }
bool v2_is_tiny_bits(uint u) { return (u & V2_ABS) <= V2_MIN_NORMAL; }

// The output rule: |x| <= 2^-126 (zeros, denormals, FLT_MIN) -> +0, any NaN -> the canonical one.
float v2_flush(float x) {
  const uint u = floatBitsToUint(x);
  if (v2_is_nan_bits(u)) return uintBitsToFloat(V2_NAN);
  return v2_is_tiny_bits(u) ? 0.0 : x;
}

// kernels/half.h's f32_to_f16_bits (round to nearest even; NaN stays NaN). Its one float add (for
// f16 subnormal results) has normal operands once the input is flushed, so it rounds alike
// everywhere.
uint v2_f32_to_f16_bits(float f) {
  const uint kInf = 255u << 23;
  const uint kF16Max = (127u + 16u) << 23;
  const uint kDenormMagic = ((127u - 15u) + (23u - 10u) + 1u) << 23;
  uint u = floatBitsToUint(f);
  const uint sign = u & 0x80000000u;
  u ^= sign;
  uint o;
  if (u >= kF16Max) {
    o = u > kInf ? (0x7e00u | ((u >> 13) & 0x1ffu)) : 0x7c00u;
  } else if (u < (113u << 23)) {
    precise float sum = uintBitsToFloat(u) + uintBitsToFloat(kDenormMagic);
    o = floatBitsToUint(sum) - kDenormMagic;
  } else {
    const uint mant_odd = (u >> 13) & 1u;
    u += ((15u - 127u) << 23) + 0xfffu + mant_odd;
    o = u >> 13;
  }
  return (o | (sign >> 16)) & 0xffffu;
}

// kernels/half.h's f16_bits_to_f32, by integer arithmetic only (f16 subnormals: m * 2^-24).
float v2_f16_to_f32(uint h) {
  const uint sign = (h & 0x8000u) << 16;
  const uint e = (h >> 10) & 0x1fu;
  const uint m = h & 0x3ffu;
  if (e == 0u) {
    precise float v = float(m) * 5.9604644775390625e-8;  // 2^-24
    return uintBitsToFloat(floatBitsToUint(v) | sign);
  }
  if (e == 31u) return uintBitsToFloat(sign | 0x7f800000u | (m << 13) | (m != 0u ? 0x400000u : 0u));
  return uintBitsToFloat(sign | ((e + 112u) << 23) | (m << 13));
}

// kernels::v2::flush_summand: |t| < 2^-100 -> +0 (every term of a signed sum).
float v2_flush_summand(float t) { return (floatBitsToUint(t) & V2_ABS) < 0x0d800000u ? 0.0 : t; }

// 2^k for k in [-126, 127], from its bits.
float v2_pow2(int k) { return uintBitsToFloat(uint(k + 127) << 23); }

// The significand in [1, 2) and the unbiased exponent of a finite non-tiny |x| (its bits).
float v2_significand(uint abs_bits, out int e) {
  e = int(abs_bits >> 23) - 127;
  return uintBitsToFloat((abs_bits & 0x007fffffu) | 0x3f800000u);
}

// 1 / m for m in [1, 2): the line 24/17 - 8/17 m, three Newton steps.
float v2_recip_significand(float m) {
  precise float y = uintBitsToFloat(0x3fb4b4b5u) - uintBitsToFloat(0x3ef0f0f1u) * m;
  for (int step = 0; step < 3; ++step) {
    precise float t = 1.0 - m * y;
    precise float next = y + y * t;
    y = next;
  }
  return y;
}

// a - b q exactly (Dekker's two-product, the split by masking the low 12 significand bits).
float v2_exact_residual(float a, float b, float q) {
  const float bh = uintBitsToFloat(floatBitsToUint(b) & 0xfffff000u);
  const float qh = uintBitsToFloat(floatBitsToUint(q) & 0xfffff000u);
  precise float bl = b - bh;
  precise float ql = q - qh;
  precise float r = (((a - bh * qh) - bh * ql) - bl * qh) - bl * ql;
  return r;
}

// q 2^k for q in (0.5, 2), overflow to +inf, tiny results flushed.
float v2_scale_by_pow2(float q, int k) {
  if (k < -126) return 0.0;
  if (k > 128) return uintBitsToFloat(V2_INF);
  if (k == 128) {
    precise float big = (q * v2_pow2(127)) * 2.0;
    return big;
  }
  precise float r = q * v2_pow2(k);
  return v2_flush(r);
}

float v2_divide(float a, float b) {
  const uint ua = floatBitsToUint(a), ub = floatBitsToUint(b);
  if (v2_is_nan_bits(ua) || v2_is_nan_bits(ub)) return uintBitsToFloat(V2_NAN);
  const uint sign = (ua ^ ub) & V2_SIGN;
  const uint aa = ua & V2_ABS, ab = ub & V2_ABS;
  const bool a_inf = aa == V2_INF, b_inf = ab == V2_INF;
  const bool a_tiny = v2_is_tiny_bits(aa), b_tiny = v2_is_tiny_bits(ab);
  if ((a_inf && b_inf) || (a_tiny && b_tiny)) return uintBitsToFloat(V2_NAN);
  if (a_inf || b_tiny) return uintBitsToFloat(sign | V2_INF);
  if (b_inf || a_tiny) return 0.0;
  int ea, eb;
  const float ma = v2_significand(aa, ea);
  const float mb = v2_significand(ab, eb);
  const float y = v2_recip_significand(mb);
  precise float q0 = ma * y;
  const float res = v2_exact_residual(ma, mb, q0);
  precise float q = q0 + res * y;
  const uint r = floatBitsToUint(v2_scale_by_pow2(q, ea - eb));
  return uintBitsToFloat(r | (r != 0u ? sign : 0u));
}

float v2_recip(float x) { return v2_divide(1.0, x); }

float v2_rsqrt(float x) {
  const uint u = floatBitsToUint(x);
  if (v2_is_nan_bits(u)) return uintBitsToFloat(V2_NAN);
  if (v2_is_tiny_bits(u)) return uintBitsToFloat(V2_INF);
  if ((u & V2_SIGN) != 0u) return uintBitsToFloat(V2_NAN);
  if (u == V2_INF) return 0.0;
  int e;
  precise float m = v2_significand(u, e);
  if ((e & 1) != 0) {
    precise float m2 = m * 2.0;
    m = m2;
    e -= 1;
  }
  precise float y = uintBitsToFloat(0x5f3759dfu - (floatBitsToUint(m) >> 1));
  precise float h = m * 0.5;
  for (int step = 0; step < 3; ++step) {
    precise float next = y * (1.5 - (h * y) * y);
    y = next;
  }
  precise float th = m * y;
  const float tl_neg = v2_exact_residual(th, m, y);  // th - m y
  precise float tl = -tl_neg;
  const float one_minus = v2_exact_residual(1.0, th, y);
  precise float res = one_minus - tl * y;
  precise float refined = y + (y * 0.5) * res;
  precise float r = refined * v2_pow2(-e / 2);
  return v2_flush(r);
}

float v2_exp(float x) {
  const uint u = floatBitsToUint(x);
  if (v2_is_nan_bits(u)) return uintBitsToFloat(V2_NAN);
  if ((u & V2_ABS) <= 0x33000000u) return 1.0;  // |x| <= 2^-25
  if (x > uintBitsToFloat(0x42b170a4u)) return uintBitsToFloat(V2_INF);  // 88.72
  if (x < uintBitsToFloat(0xc2af0000u)) return 0.0;                     // -87.5
  const float shifter = uintBitsToFloat(0x4b400000u);                     // 1.5 * 2^23
  precise float n = (x * uintBitsToFloat(0x3fb8aa3bu) + shifter) - shifter;
  precise float r = (x - n * uintBitsToFloat(0x3f318000u)) - n * uintBitsToFloat(0xb95e8083u);
  precise float p = uintBitsToFloat(0x39506967u);
  precise float p1 = p * r + uintBitsToFloat(0x3ab743ceu);
  precise float p2 = p1 * r + uintBitsToFloat(0x3c088908u);
  precise float p3 = p2 * r + uintBitsToFloat(0x3d2aa9c1u);
  precise float p4 = p3 * r + uintBitsToFloat(0x3e2aaaaau);
  precise float p5 = p4 * r + uintBitsToFloat(0x3f000000u);
  precise float p6 = ((p5 * r) * r + r) + 1.0;
  const int ni = int(n);
  const int half_n = ni / 2;  // OpSDiv: truncation, as C++
  precise float y = (p6 * v2_pow2(half_n)) * v2_pow2(ni - half_n);
  return v2_flush(y);
}

float v2_sigmoid(float x) {
  const float e = v2_exp(-v2_flush(x));
  precise float d = 1.0 + e;
  return v2_recip(d);
}

float v2_silu(float x) {
  const float g = v2_flush(x);
  const float e = v2_exp(-g);
  precise float d = 1.0 + e;
  return v2_divide(g, d);
}
