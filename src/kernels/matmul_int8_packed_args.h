// Internal: what the packed W8A8 entry point hands to its per-target implementations, and the
// panel layout (matmul_int8_packed.h) in one place for the packer, the unpacker and the kernels
// (the Highway targets of matmul_int8_packed.cpp and the ARM dot-product kernels of
// matmul_int8_arm.cpp).
#pragma once
#include <cstddef>
#include <cstdint>

namespace stoa::kernels {

struct PackedArgs {
  const uint8_t* w;  // panels, panel_bytes apart
  size_t panel_bytes;
  size_t rows;  // the matrix's real rows (stores stop there)
  size_t cols;
  size_t groups;      // cols / 32
  const int8_t* xq;   // batch * cols
  const float* xd;    // batch * groups
  const int32_t* xs;  // batch * groups: block sums of xq
  float* y;
  size_t y_stride;
  size_t row_begin;  // outputs outside [row_begin, row_end) are not written
  size_t row_end;
};

// Byte offsets within a panel of the dword holding values 4k..4k+3 of block g of row `lane`, and
// of the panel's f16 scales (scale of block g, row j at index g * 16 + j).
constexpr size_t kPackedBlockBytes = 32 * 16;  // one block of one panel
constexpr size_t packed_value_offset(size_t g, size_t k, size_t lane) {
  return g * kPackedBlockBytes + k * 64 + lane * 4;
}
constexpr size_t packed_scales_offset(size_t groups) {
  return groups * kPackedBlockBytes;
}

}  // namespace stoa::kernels
