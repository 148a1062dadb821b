#include "engine/ops.h"

#include <cmath>
#include <vector>

#include "kernels/arith_v2.h"
#include "kernels/fixed_math.h"
#include "kernels/vec_ops.h"

namespace stoa::engine {

void rms_norm(const float* x, const float* weight, int64_t n, double eps, float* out) {
  // The SIMD form of kernels::v2::rmsnorm_row (the same bits, test_kernels EngineV2Kernels).
  kernels::rmsnorm(x, weight, static_cast<size_t>(n), static_cast<float>(eps), out);
}

void rope_angles(int64_t head_dim, int64_t position, double theta, float* cos_out, float* sin_out) {
  const int64_t half = head_dim / 2;
  for (int64_t i = 0; i < half; ++i) {
    // Angles in double: at long positions an f32 angle loses the low bits of the phase. Our own
    // pow and sincos (kernels/fixed_math.h): the same bits whatever the machine's libm.
    double inv_freq =
        kernels::fixed_pow(theta, -2.0 * static_cast<double>(i) / static_cast<double>(head_dim));
    double angle = static_cast<double>(position) * inv_freq;
    double s = 0, c = 0;
    kernels::fixed_sincos(angle, &s, &c);
    cos_out[i] = static_cast<float>(c);
    sin_out[i] = static_cast<float>(s);
  }
}

void rope_apply(float* head, int64_t head_dim, const float* cos_in, const float* sin_in) {
  // The SIMD form of kernels::v2::rope_apply (the same bits, test_kernels EngineV2Kernels).
  kernels::rope_rotate_half(head, 1, static_cast<size_t>(head_dim), cos_in, sin_in);
}

void rope_rotate_half(float* head, int64_t head_dim, int64_t position, double theta) {
  float c[512], s[512];
  if (head_dim / 2 > 512) {
    std::vector<float> cb(static_cast<size_t>(head_dim / 2)), sb(cb.size());
    rope_angles(head_dim, position, theta, cb.data(), sb.data());
    rope_apply(head, head_dim, cb.data(), sb.data());
    return;
  }
  rope_angles(head_dim, position, theta, c, s);
  rope_apply(head, head_dim, c, s);
}

void softmax(float* x, int64_t n) {
  kernels::v2::softmax_row(x, static_cast<size_t>(n));
}

}  // namespace stoa::engine
