// A linear map y = W x with W [out, in] held either in f32 or on the int8 grid (GGUF Q8_0
// blocks). int8 products run on one of three backends:
//   kW8A8      (default) kernels/matmul_w8a8: activations quantised per 32-block to int8, exact
//              integer block dot products — llama.cpp's Q8_0 x Q8_0 arithmetic, the fastest
//              kernel on every x86 target we measured (docs/design/fastengine.md);
//   kW8A32     kernels/matmul_w8a32: f32 activations, weights widened in SIMD registers;
//   kReference plain loops (dequantize on the fly, f32 accumulation): the reference engine.
// All three are batch invariant: an output element depends only on its weight row and its
// token's activations, never on the other tokens of the pass or on the thread split.
#pragma once
#include <cstdint>
#include <span>
#include <string>

#include "core/int8_grid.h"
#include "core/page_aligned.h"
#include "core/tensor.h"
#include "core/thread_pool.h"
#include "kernels/matmul_int8_packed.h"

namespace stoa::engine {

enum class Backend { kReference, kW8A8, kW8A32 };
class Linear;

// One product of a batched call: y = linear x for `tokens` rows of x ([tokens, cols]).
struct LinearJob {
  const Linear* linear = nullptr;
  const float* x = nullptr;
  int64_t tokens = 0;
  float* y = nullptr;  // [tokens, rows]
};
const char* backend_name(Backend backend);
Backend parse_backend(const std::string& name);  // "reference" | "w8a8" | "w8a32"

class Linear {
 public:
  Linear() = default;
  static Linear from_f32(Tensor weight);  // [out, in] f32
  static Linear from_int8(Int8Matrix weight);

  Linear(Linear&&) noexcept = default;
  Linear& operator=(Linear&&) noexcept = default;

  int64_t rows() const { return rows_; }  // output features
  int64_t cols() const { return cols_; }  // input features
  bool is_int8() const { return int8_; }
  Backend backend() const { return backend_; }
  // Switching to or from kW8A8 on AVX3_DL converts the int8 weights between the row-major grid
  // and the packed panels (one layout is held at a time).
  void set_backend(Backend backend);
  // Holds the row-major grid from now on, whatever the backend would prefer (unpacking panels
  // if held): a unified-memory device reads it in place (gpu/vulkan imports its pages), so the
  // weights exist once. Writes (set_int8_value, replace_int8, ...) then land in the same pages.
  void hold_grid();
  // The held grid in place: values and scales each start on a page and their allocations span
  // whole pages (core/page_aligned.h); null pointers while the Linear holds packed panels.
  kernels::Int8Weights grid_view() const;

  // y[t * rows + r] = sum_c W[r, c] * x[t * cols + c] for t in [0, tokens). Output rows are
  // spread over the pool; every output element is computed by the same code whatever `tokens`
  // is, so a prefill and a token-by-token decode agree bit for bit.
  void forward(const float* x, int64_t tokens, float* y, ThreadPool& pool) const;
  // Several linears reading the same input (Q/K/V; gate/up): ys[i] = linears[i] x. On the int8
  // SIMD backends the input is quantised once and all their rows go out in one parallel
  // operation; each output is bit-identical to linears[i]->forward(x, ...). At most 8; all
  // must have the same cols.
  static void forward_group(std::span<const Linear* const> linears, const float* x, int64_t tokens,
                            float* const* ys, ThreadPool& pool);
  // Independent products in one parallel operation (MoE: every routed expert's gate/up, then
  // every down), each on its own input; jobs reading the same x with the same tokens share
  // one quantisation. Every output is bit-identical to job.linear->forward(job.x, ...).
  static void forward_jobs(std::span<const LinearJob> jobs, ThreadPool& pool);
  // Row r of W in f32 (dequantized when int8): the embedding lookup.
  void row(int64_t r, float* out) const;

  const Tensor& f32() const;  // throws unless f32
  // The int8 weights on the row-major grid (throws unless int8): a copy, unpacked from the
  // panels when the Linear holds them packed.
  Int8Matrix int8() const;
  // Rows [r0, r1) of the same (values: (r1 - r0) * cols, f16 scales: (r1 - r0) * cols / 32),
  // for a reader that hashes a tensor chunk by chunk instead of copying it whole. Packed: read
  // panel by panel (kernels::PackedInt8::unpack_rows), fastest for whole 16-row panels.
  void int8_rows(int64_t r0, int64_t r1, int8_t* values, uint16_t* scales) const;
  // In-place weight updates (PULSE patches): same shape; packed weights are repacked.
  void replace_int8(Int8Matrix weight);
  void replace_int8_values(std::span<const int8_t> values);
  // One int8 element in place, in whichever layout is held (no repack): the value at flat
  // position r * cols + c and the f16 scale bits of group r * cols / 32 + c / 32. Unchecked:
  // the caller (a validated PULSE patch) keeps them in range.
  int8_t int8_value(int64_t position) const;
  void set_int8_value(int64_t position, int8_t v);
  uint16_t int8_scale(int64_t group) const;
  void set_int8_scale(int64_t group, uint16_t bits);
  // A patch's points in place: for each i in order, old[i] (when old is not null) = the value
  // at flat position positions[i], which then becomes values[i]. Unchecked, as set_int8_value;
  // the points' cache misses are overlapped (prefetched a batch ahead), not waited for one by one.
  void exchange_int8_values(std::span<const uint64_t> positions, const int8_t* values, int8_t* old);
  Tensor& f32_mutable();
  // Bytes held (the packed panels pad rows to 16 and scale blocks to 64 B).
  size_t nbytes() const;
  // Bytes of the weights on the int8 grid (values + f16 scales), whatever the layout held:
  // what a batch-1 step streams.
  size_t int8_grid_nbytes() const;

 private:
  void forward_plain(const float* x, int64_t tokens, float* y, ThreadPool& pool) const;
  // Holds the int8 weights in the layout the backend reads: packed panels for kW8A8 where the
  // packed kernel is the target's fast path (the grid is then released: a laptop holds one copy),
  // else the row-major grid.
  void settle_layout();

  int64_t rows_ = 0;
  int64_t cols_ = 0;
  bool int8_ = false;
  Backend backend_ = Backend::kW8A8;
  Tensor f32_;
  // The row-major grid in page-aligned storage (a device may import it; see hold_grid).
  struct Grid {
    int64_t rows = 0;
    int64_t cols = 0;
    PageVector<int8_t> values;
    PageVector<uint16_t> scales;
    size_t nbytes() const { return values.size() + scales.size() * 2; }
  };
  // Copies m's grid into q_; in place (same addresses) when q_ already holds one of its size.
  void assign_grid(const Int8Matrix& m);

  // int8 weights: exactly one of q_.values/scales (row-major grid) and packed_ (16-row panels,
  // kernels/matmul_int8_packed.h) is filled; q_.rows/cols are always set.
  Grid q_;
  bool grid_held_ = false;  // hold_grid(): never packed
  kernels::PackedInt8 packed_;
};

// Dot products shared by the blocks: eight independent partial sums so the compiler can
// vectorise without -ffast-math, in a fixed order so results do not depend on the machine.
float dot_f32(const float* a, const float* b, int64_t n);
float dot_int8_row(const int8_t* q, const uint16_t* scales, const float* x, int64_t n);

}  // namespace stoa::engine
