// W8A8 products on int8 weights repacked into 16-row panels for the AVX-512 VNNI GEMM
// microkernel (the engine's fast path on Ice Lake / Zen 4; docs/design/fastengine.md).
//
// Why a second layout: on the row-major grid (matmul_int8.h) one 512-bit vpdpbusd holds partial
// sums of 2 blocks x 8 lanes for ONE output, so every 64 products need a convert, a multiply and
// an FMA as well — the tile is bound by those f32 operations (prefill, batch 32). Here lane j of
// a vector belongs to row j of a panel: a block's 32 products of 16 rows take 8 vpdpbusd whose
// lanes end up holding the 16 exact block sums, and the f32 work (convert, scale, FMA) is done
// once per block for 16 outputs — 3 f32 operations per 512 products instead of per 64.
//
// Layout of panel p (rows 16p .. 16p+15; rows past the matrix are zero weights with zero scales):
//   groups x 512 bytes: for block g, dword k (values 4k..4k+3 of the block), lane j:
//     byte [g*512 + k*64 + j*4 + i] = W[16p + j, 32g + 4k + i] + 128 (as uint8: vpdpbusd's
//     unsigned operand; the bias contributes 128 * sum(x), removed via Q8Activations::sums)
//   then groups x 16 f16 scales (scale of row 16p + j, block g at [g*16 + j]), padded to 64 B.
// Panels are 64-byte aligned and contiguous, so one panel is one sequential stream.
//
// Arithmetic per output element (every target, every batch and row split — batch invariant and
// the same bits on every machine): acc = 0; for each block g in order:
//   acc = fma(float(isum_g), f32(d_w,g) * d_x,g, acc)        isum_g the exact int32 block sum
// which is the scalar target's formula of matmul_w8a8. Only AVX3_DL has the SIMD kernel; other
// targets compute the same formula in plain C++ (packed_w8a8_preferred() says which is which).
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <span>

#include "kernels/matmul_int8.h"

namespace stoa::kernels {

inline constexpr int64_t kPanelRows = 16;

class PackedInt8 {
 public:
  PackedInt8() = default;
  // Repacks w (throws std::invalid_argument on a malformed view).
  static PackedInt8 pack(const Int8Weights& w);

  bool empty() const { return bytes_ == nullptr; }
  int64_t rows() const { return rows_; }
  int64_t cols() const { return cols_; }
  int64_t panels() const { return (rows_ + kPanelRows - 1) / kPanelRows; }
  size_t panel_bytes() const { return panel_bytes_; }
  size_t nbytes() const { return panel_bytes_ * static_cast<size_t>(panels()); }
  const uint8_t* data() const { return bytes_.get(); }
  // The inverse of pack for row r: its cols values and cols/32 f16 scales, bit for bit (so a
  // caller may keep only the packed copy).
  void unpack_row(int64_t r, int8_t* values, uint16_t* scales) const;
  // Rows [r0, r1) as unpack_row gives them, one after another ((r1 - r0) * cols values and
  // (r1 - r0) * cols / 32 scales), read panel by panel: each 64-byte line of a block holds one
  // dword of each of 16 rows, so a line is read once and its 16 dwords go to their rows (row by
  // row, every line is visited 16 times for 4 bytes). What a reader hashing a tensor uses.
  void unpack_rows(int64_t r0, int64_t r1, int8_t* values, uint16_t* scales) const;
  // One element in place, no repack (a PULSE patch scatters into the panels): value (r, c) and
  // the f16 scale bits of block g of row r. Unchecked: the caller keeps r, c, g in range.
  int8_t value(int64_t r, int64_t c) const;
  void set_value(int64_t r, int64_t c, int8_t v);
  uint16_t scale(int64_t r, int64_t g) const;
  void set_scale(int64_t r, int64_t g, uint16_t bits);
  // Many elements in place, by flat position p = r * cols + c: for each i in order, old[i] (when
  // old is not null) = the value at positions[i], which then becomes values[i]. Unchecked, as
  // set_value. A patch's points lie far apart, so each is a cache miss: the addresses of the
  // next batch are computed and prefetched while this one is written, overlapping the misses.
  void exchange_values(std::span<const uint64_t> positions, const int8_t* values, int8_t* old);

 private:
  struct Free {
    void operator()(uint8_t* p) const { std::free(p); }
  };
  std::unique_ptr<uint8_t[], Free> bytes_;
  int64_t rows_ = 0;
  int64_t cols_ = 0;
  size_t panel_bytes_ = 0;
};

// True when the dispatch target runs the packed SIMD kernel (AVX3_DL): callers pack only then,
// and keep using matmul_w8a8 on the row-major grid elsewhere.
bool packed_w8a8_preferred();

// y[b * y_stride + o] for o in [row_begin, row_end), b < acts.batch. acts.sums is required.
void matmul_w8a8_packed(const PackedInt8& w, const Q8Activations& acts, float* y, int64_t y_stride,
                        int64_t row_begin, int64_t row_end);

}  // namespace stoa::kernels
