// Scalar references for every kernel: the plainest loops that state what each kernel computes,
// accumulating in double where a sum is involved. Tests compare the SIMD kernels against these
// on every target; the quantiser must match its reference exactly.
#pragma once
#include <cstddef>
#include <cstdint>

#include "kernels/matmul_int8.h"

namespace stoa::kernels::ref {

void quantize_activations_q8(const float* x, int64_t x_stride, const Q8Activations& acts);
// y[b * y_stride + o] for every row, plus sum_i |w * x| in abs_out (same layout) for tolerances.
void matmul_w8a8(const Int8Weights& w, const Q8Activations& acts, double* y, double* abs_out,
                 int64_t y_stride);
void matmul_w8a32(const Int8Weights& w, const float* x, int64_t x_stride, int64_t batch, double* y,
                  double* abs_out, int64_t y_stride);

void rmsnorm(const float* x, const float* weight, size_t n, float eps, float* out);
double dot(const float* a, const float* b, size_t n);
void axpy(float alpha, const float* x, float* y, size_t n);
void softmax(float* x, size_t n);
double logsumexp(const float* x, size_t n);
void silu_mul(const float* gate, const float* up, float* out, size_t n);
void rope_rotate_half(float* x, size_t n_heads, size_t head_dim, const float* cos,
                      const float* sin);

}  // namespace stoa::kernels::ref
