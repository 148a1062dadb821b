// Int8-weight matrix products for a batch of activation rows: Y[b, o] = sum_i W[o, i] * X[b, i].
//
// W is in the int8 grid = GGUF Q8_0 layout (core/int8_grid.h): values row-major [rows, cols],
// one f16 scale per group of 32 consecutive values of a row ([rows, cols/32], f16 bits).
//
// Two variants, chosen by the engine by measurement (docs/design/kernels.md):
//   W8A8  activations quantised per 32-block to int8 (llama.cpp's Q8_0 x Q8_0 path: d = amax/127
//         stored as f16, q = roundf(x / d)); per block an exact integer dot product, then
//         acc += float(isum) * (d_w * d_x).
//   W8A32 f32 activations; the int8 weights are widened to f32 and scaled per block.
//
// Batching: each weight row is read from memory once per call and reused from cache for every
// activation row, so a batched call costs about one weight pass, not B.
//
// Determinism (batch invariance): on a given SIMD target, Y[b, o] depends only on W[o, :] and
// X[b, :] — the reduction order over the input dimension is fixed per output element and does
// not depend on the batch size, on which other rows share the call, or on [row_begin, row_end).
// Different targets (AVX2 vs AVX-512) may differ in the last bits.
//
// Threads: split the output rows with [row_begin, row_end); the kernels never allocate.
#pragma once
#include <cstddef>
#include <cstdint>

namespace stoa::kernels {

inline constexpr int64_t kQ8Block = 32;

// A read-only view of an int8-grid matrix.
struct Int8Weights {
  const int8_t* values = nullptr;    // rows * cols
  const uint16_t* scales = nullptr;  // rows * cols / 32, f16 bits
  int64_t rows = 0;
  int64_t cols = 0;  // a positive multiple of 32
};

// Activations quantised for the W8A8 path (caller-owned buffers), llama.cpp's block_q8_0 split
// into two arrays: values in [-127, 127] and one scale per 32-block.
struct Q8Activations {
  int8_t* values = nullptr;  // batch * cols
  float* scales = nullptr;   // batch * cols / 32; each is an f16-representable float
  int64_t batch = 0;
  int64_t cols = 0;
  // Optional, batch * cols / 32: each block's sum of values (the packed kernel's bias
  // correction, matmul_int8_packed.h); filled by quantize_activations_q8 when not null.
  int32_t* sums = nullptr;
};

// Quantises x[b * x_stride + i] (b < acts.batch, i < acts.cols) into acts (and the block sums
// when acts.sums is set).
void quantize_activations_q8(const float* x, int64_t x_stride, const Q8Activations& acts);

// y[b * y_stride + o] for o in [row_begin, row_end), b < acts.batch.
void matmul_w8a8(const Int8Weights& w, const Q8Activations& acts, float* y, int64_t y_stride,
                 int64_t row_begin, int64_t row_end);

// y[b * y_stride + o] = sum_i W[o, i] * x[b * x_stride + i], o in [row_begin, row_end), b < batch.
void matmul_w8a32(const Int8Weights& w, const float* x, int64_t x_stride, int64_t batch, float* y,
                  int64_t y_stride, int64_t row_begin, int64_t row_end);

// out[i] = W[row, i] as f32 (q * d, one rounding), e.g. an embedding lookup from an int8 table.
void dequantize_q8_row(const Int8Weights& w, int64_t row, float* out);

}  // namespace stoa::kernels
