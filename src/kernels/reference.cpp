#include "kernels/reference.h"

#include <cmath>

#include "kernels/half.h"

namespace stoa::kernels::ref {

void quantize_activations_q8(const float* x, int64_t x_stride, const Q8Activations& acts) {
  const int64_t groups = acts.cols / kQ8Block;
  for (int64_t b = 0; b < acts.batch; ++b) {
    for (int64_t g = 0; g < groups; ++g) {
      const float* blk = x + b * x_stride + g * kQ8Block;
      float amax = 0.0f;
      for (int64_t i = 0; i < kQ8Block; ++i) amax = std::fmax(amax, std::fabs(blk[i]));
      const float d = amax / 127.0f;
      const float id = d != 0.0f ? 1.0f / d : 0.0f;
      acts.scales[b * groups + g] = f16_bits_to_f32(f32_to_f16_bits(d));
      for (int64_t i = 0; i < kQ8Block; ++i)
        acts.values[b * acts.cols + g * kQ8Block + i] =
            static_cast<int8_t>(std::roundf(blk[i] * id));
    }
  }
}

void matmul_w8a8(const Int8Weights& w, const Q8Activations& acts, double* y, double* abs_out,
                 int64_t y_stride) {
  const int64_t groups = w.cols / kQ8Block;
  for (int64_t b = 0; b < acts.batch; ++b) {
    for (int64_t o = 0; o < w.rows; ++o) {
      double sum = 0, abs_sum = 0;
      for (int64_t g = 0; g < groups; ++g) {
        int32_t isum = 0, iabs = 0;
        for (int64_t i = g * kQ8Block; i < (g + 1) * kQ8Block; ++i) {
          const int32_t t =
              static_cast<int32_t>(w.values[o * w.cols + i]) * acts.values[b * acts.cols + i];
          isum += t;
          iabs += t < 0 ? -t : t;
        }
        const double scale = static_cast<double>(f16_bits_to_f32(w.scales[o * groups + g])) *
                             acts.scales[b * groups + g];
        sum += isum * scale;
        abs_sum += iabs * std::fabs(scale);
      }
      y[b * y_stride + o] = sum;
      abs_out[b * y_stride + o] = abs_sum;
    }
  }
}

void matmul_w8a32(const Int8Weights& w, const float* x, int64_t x_stride, int64_t batch, double* y,
                  double* abs_out, int64_t y_stride) {
  const int64_t groups = w.cols / kQ8Block;
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t o = 0; o < w.rows; ++o) {
      double sum = 0, abs_sum = 0;
      for (int64_t i = 0; i < w.cols; ++i) {
        const double t = static_cast<double>(w.values[o * w.cols + i]) *
                         f16_bits_to_f32(w.scales[o * groups + i / kQ8Block]) * x[b * x_stride + i];
        sum += t;
        abs_sum += std::fabs(t);
      }
      y[b * y_stride + o] = sum;
      abs_out[b * y_stride + o] = abs_sum;
    }
  }
}

void rmsnorm(const float* x, const float* weight, size_t n, float eps, float* out) {
  double ss = 0;
  for (size_t i = 0; i < n; ++i) ss += static_cast<double>(x[i]) * x[i];
  const double inv = 1.0 / std::sqrt(ss / static_cast<double>(n) + eps);
  for (size_t i = 0; i < n; ++i)
    out[i] = static_cast<float>(x[i] * inv * (weight ? weight[i] : 1.0f));
}

double dot(const float* a, const float* b, size_t n) {
  double s = 0;
  for (size_t i = 0; i < n; ++i) s += static_cast<double>(a[i]) * b[i];
  return s;
}

void axpy(float alpha, const float* x, float* y, size_t n) {
  for (size_t i = 0; i < n; ++i)
    y[i] = static_cast<float>(y[i] + static_cast<double>(alpha) * x[i]);
}

void softmax(float* x, size_t n) {
  if (n == 0) return;
  double mx = x[0];
  for (size_t i = 1; i < n; ++i) mx = std::fmax(mx, x[i]);
  double sum = 0;
  for (size_t i = 0; i < n; ++i) sum += std::exp(x[i] - mx);
  for (size_t i = 0; i < n; ++i) x[i] = static_cast<float>(std::exp(x[i] - mx) / sum);
}

double logsumexp(const float* x, size_t n) {
  double mx = -INFINITY;
  for (size_t i = 0; i < n; ++i) mx = std::fmax(mx, x[i]);
  if (mx == -INFINITY) return mx;
  double sum = 0;
  for (size_t i = 0; i < n; ++i) sum += std::exp(x[i] - mx);
  return mx + std::log(sum);
}

void silu_mul(const float* gate, const float* up, float* out, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    const double g = gate[i];
    out[i] = static_cast<float>(g / (1.0 + std::exp(-g)) * up[i]);
  }
}

// HF's apply_rotary_pos_emb: x * cos + rotate_half(x) * sin, with rotate_half(x) = [-x2, x1]
// and cos/sin repeated over both halves; each product rounded to f32 before the sum, as torch
// computes it in f32.
void rope_rotate_half(float* x, size_t n_heads, size_t head_dim, const float* cos,
                      const float* sin) {
  const size_t half = head_dim / 2;
  for (size_t h = 0; h < n_heads; ++h) {
    float* v = x + h * head_dim;
    for (size_t i = 0; i < half; ++i) {
      const float x1 = v[i], x2 = v[i + half];
      const float a = x1 * cos[i], b = x2 * sin[i], c = x2 * cos[i], d = x1 * sin[i];
      v[i] = a - b;
      v[i + half] = c + d;
    }
  }
}

}  // namespace stoa::kernels::ref
