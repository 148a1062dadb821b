// The packed W8A8 kernel (see matmul_int8_packed.h). Compiled once per SIMD target by Highway's
// foreach_target; AVX3_DL runs the VNNI microkernel, NEON the SDOT / SMMLA kernels of
// matmul_int8_arm.cpp where the CPU has them, every other target the same formula in plain C++
// (same bits).
#include "kernels/matmul_int8_packed.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <new>
#include <stdexcept>
#include <string>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "kernels/half.h"
#include "kernels/matmul_int8_arm.h"
#include "kernels/matmul_int8_packed_args.h"
#include "kernels/nan_outputs.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/matmul_int8_packed.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

HWY_BEFORE_NAMESPACE();
#include "kernels/hwy_avx3_dl_vnni.h"  // IWYU pragma: keep
namespace stoa::kernels {
namespace HWY_NAMESPACE {

constexpr size_t kBlock = 32;
constexpr size_t kPanel = 16;
static_assert(kPackedBlockBytes == kBlock * kPanel);

#if HWY_TARGET == HWY_AVX3_DL
// P panels (P * 16 rows, pstep panels apart) x C activation rows, all blocks. Per block: the
// accumulation of each (panel, row) starts from -128 * sum(x block) (the weights' +128 bias);
// 8 vpdpbusd, each a 64-byte load of the panel and a broadcast dword of the activation row, leave
// the 16 exact block sums in the lanes; then convert, scale by d_w * d_x and FMA — per lane
// exactly the header's formula. The panel's value bytes are read front to back.
constexpr size_t kMaxC = 6;  // P = 2: 12 int32 + 12 f32 accumulators + 2 weight vectors

template <size_t P, size_t C>
HWY_INLINE void Tile(const PackedArgs& a, size_t panel, size_t pstep, size_t b) {
  const size_t groups = a.groups;
  const uint8_t* HWY_RESTRICT pw[P];
  const uint16_t* HWY_RESTRICT ps[P];
  for (size_t p = 0; p < P; ++p) {
    pw[p] = a.w + (panel + p * pstep) * a.panel_bytes;
    ps[p] = reinterpret_cast<const uint16_t*>(pw[p] + packed_scales_offset(groups));
  }
  const int8_t* HWY_RESTRICT xr[C];
  for (size_t c = 0; c < C; ++c) xr[c] = a.xq + (b + c) * a.cols;
  const float* HWY_RESTRICT xd = a.xd + b * groups;
  const int32_t* HWY_RESTRICT xs = a.xs + b * groups;

  __m512 acc[P][C];
  for (size_t p = 0; p < P; ++p)
    for (size_t c = 0; c < C; ++c) acc[p][c] = _mm512_setzero_ps();
  for (size_t g = 0; g < groups; ++g) {
    __m512i isum[P][C];
    for (size_t c = 0; c < C; ++c) {
      const __m512i init = _mm512_set1_epi32(-128 * xs[c * groups + g]);
      for (size_t p = 0; p < P; ++p) isum[p][c] = init;
    }
    for (size_t k = 0; k < kBlock / 4; ++k) {
      __m512i wv[P];
      for (size_t p = 0; p < P; ++p)
        wv[p] = _mm512_load_si512(pw[p] + packed_value_offset(g, k, 0));
      for (size_t c = 0; c < C; ++c) {
        int32_t quad;
        std::memcpy(&quad, xr[c] + g * kBlock + 4 * k, sizeof(quad));
        const __m512i xb = _mm512_set1_epi32(quad);
        for (size_t p = 0; p < P; ++p) isum[p][c] = _mm512_dpbusd_epi32(isum[p][c], wv[p], xb);
      }
    }
    __m512 sw[P];
    for (size_t p = 0; p < P; ++p)
      sw[p] =
          _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(ps[p] + g * kPanel)));
    for (size_t c = 0; c < C; ++c) {
      const __m512 dx = _mm512_set1_ps(xd[c * groups + g]);
      for (size_t p = 0; p < P; ++p)
        acc[p][c] = _mm512_add_ps(
            acc[p][c], _mm512_mul_ps(_mm512_cvtepi32_ps(isum[p][c]), _mm512_mul_ps(sw[p], dx)));
    }
  }
  for (size_t p = 0; p < P; ++p) {
    const size_t row0 = (panel + p * pstep) * kPanel;
    const size_t lo = std::max(row0, a.row_begin);
    const size_t hi = std::min({row0 + kPanel, a.row_end, a.rows});
    if (lo >= hi) continue;
    const __mmask16 mask =
        static_cast<__mmask16>(((1u << (hi - row0)) - 1u) & ~((1u << (lo - row0)) - 1u));
    // A NaN output leaves as the canonical NaN (v2; x86's inf * 0 is 0xffc00000), here in
    // registers rather than in a second pass over y.
    const __m512 canonical = _mm512_castsi512_ps(_mm512_set1_epi32(0x7fc00000));
    for (size_t c = 0; c < C; ++c) {
      const __m512 v = acc[p][c];
      _mm512_mask_storeu_ps(
          a.y + (b + c) * a.y_stride + row0, mask,
          _mm512_mask_mov_ps(v, _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q), canonical));
    }
  }
}

template <size_t P>
HWY_INLINE void TileOf(const PackedArgs& a, size_t panel, size_t pstep, size_t b, size_t c) {
  switch (c) {
    case 1:
      Tile<P, 1>(a, panel, pstep, b);
      break;
    case 2:
      Tile<P, 2>(a, panel, pstep, b);
      break;
    case 3:
      Tile<P, 3>(a, panel, pstep, b);
      break;
    case 4:
      Tile<P, 4>(a, panel, pstep, b);
      break;
    case 5:
      Tile<P, 5>(a, panel, pstep, b);
      break;
    default:
      Tile<P, 6>(a, panel, pstep, b);
      break;
  }
  static_assert(kMaxC == 6, "cases cover 1..kMaxC");
}

// Every activation row for the P panels panel, panel + pstep, ... (their bytes stay in L1), in
// as few tiles as kMaxC allows, of near-equal widths (8 rows: 4 + 4, not 6 + 2 — a narrow tile
// loads the panel's vectors for few products).
template <size_t P>
HWY_INLINE void AllColumns(const PackedArgs& a, size_t panel, size_t pstep, size_t batch) {
  const size_t tiles = (batch + kMaxC - 1) / kMaxC;
  const size_t base = batch / tiles, wider = batch % tiles;
  size_t b = 0;
  for (size_t t = 0; t < tiles; ++t) {
    const size_t c = base + (t < wider ? 1 : 0);
    TileOf<P>(a, panel, pstep, b, c);
    b += c;
  }
}

// Batch 1: panels far apart walked side by side. Measured (kernels_speed packed, bench-qwen3
// token, GB/s of weights, 1 thread, two runs each): 3 streams 22.5 / 23.3, 4: 24.2 / 23.7,
// 5: 25.6 / 25.3, 6: 25.7 / 25.9, 8: 23.8 / 23.2, 12: 22.3 / 23.0 (the row-major grid's 4-row
// walk: 28.3-28.5 — its arithmetic differs, so it cannot serve batch 1 here; a row-major walk
// with this formula's integer transpose-and-add measured 21.6). 2 threads: 36-40 for 5-8.
constexpr size_t kStreams = 6;

void MatmulPacked(const PackedArgs& a, size_t batch) {
  const size_t first = a.row_begin / kPanel;
  const size_t end = (a.row_end + kPanel - 1) / kPanel;
  size_t panel = first;
  if (batch == 1) {
    // A GEMV is bound by the weight stream: as on the row-major grid (matmul_int8.cpp
    // AllRows), a few sequential streams far apart beat one (one: 15-16 GB/s).
    const size_t part = (end - first) / kStreams;
    for (size_t i = 0; i < part; ++i) Tile<kStreams, 1>(a, first + i, part, 0);
    for (panel = first + kStreams * part; panel < end; ++panel) Tile<1, 1>(a, panel, 1, 0);
    return;
  }
  const size_t part = (end - first) / 2;
  for (size_t i = 0; i < part; ++i) AllColumns<2>(a, first + i, part, batch);
  for (panel = first + 2 * part; panel < end; ++panel) AllColumns<1>(a, panel, 1, batch);
}

#else
// The same formula in plain C++ (the packed layout's reference on every other target).
void MatmulPacked(const PackedArgs& a, size_t batch) {
#if HWY_TARGET == HWY_NEON
  if (arm_matmul_w8a8_packed(a, batch)) {  // SDOT / SMMLA where the CPU has them
    canonicalize_nan_outputs(a.y, static_cast<int64_t>(a.y_stride), static_cast<int64_t>(batch),
                             static_cast<int64_t>(a.row_begin), static_cast<int64_t>(a.row_end));
    return;
  }
#endif
  for (size_t b = 0; b < batch; ++b) {
    const int8_t* x = a.xq + b * a.cols;
    for (size_t r = a.row_begin; r < a.row_end; ++r) {
      const uint8_t* panel = a.w + (r / kPanel) * a.panel_bytes;
      const uint16_t* scales =
          reinterpret_cast<const uint16_t*>(panel + packed_scales_offset(a.groups));
      const size_t lane = r % kPanel;
      float acc = 0.0f;
      for (size_t g = 0; g < a.groups; ++g) {
        int32_t isum = 0;
        for (size_t k = 0; k < kBlock / 4; ++k) {
          for (size_t i = 0; i < 4; ++i) {
            const int32_t w = int32_t{panel[packed_value_offset(g, k, lane) + i]} - 128;
            isum += w * x[g * kBlock + 4 * k + i];
          }
        }
        const float scale = f16_bits_to_f32(scales[g * kPanel + lane]) * a.xd[b * a.groups + g];
        acc = acc + static_cast<float>(isum) * scale;
      }
      a.y[b * a.y_stride + r] = acc;
    }
  }
  canonicalize_nan_outputs(a.y, static_cast<int64_t>(a.y_stride), static_cast<int64_t>(batch),
                           static_cast<int64_t>(a.row_begin), static_cast<int64_t>(a.row_end));
}
#endif

bool Preferred() {
#if HWY_TARGET == HWY_NEON
  if (arm_int8_dot() != ArmInt8Dot::kNone) return true;
#endif
  return HWY_TARGET == HWY_AVX3_DL;
}

}  // namespace HWY_NAMESPACE
}  // namespace stoa::kernels
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace stoa::kernels {

HWY_EXPORT(MatmulPacked);
HWY_EXPORT(Preferred);

namespace {

[[noreturn]] void bad(const std::string& what) {
  throw std::invalid_argument(what);
}

}  // namespace

PackedInt8 PackedInt8::pack(const Int8Weights& w) {
  if (w.cols <= 0 || w.cols % kQ8Block != 0)
    bad("PackedInt8::pack: weight cols " + std::to_string(w.cols) +
        " is not a positive multiple of 32");
  if (w.rows <= 0 || !w.values || !w.scales)
    bad("PackedInt8::pack: weight view is empty or has no rows");
  const size_t groups = static_cast<size_t>(w.cols / kQ8Block);
  const size_t value_bytes = packed_scales_offset(groups);
  const size_t scale_bytes = (groups * kPanelRows * sizeof(uint16_t) + 63) / 64 * 64;
  PackedInt8 out;
  out.rows_ = w.rows;
  out.cols_ = w.cols;
  out.panel_bytes_ = value_bytes + scale_bytes;
  const size_t total = out.nbytes();
  out.bytes_.reset(static_cast<uint8_t*>(std::aligned_alloc(64, total)));
  if (!out.bytes_) throw std::bad_alloc();
  // Padding rows: weight 0 (stored +128) and scale 0; the padding after the scales: zero.
  uint8_t* base = out.bytes_.get();
  for (int64_t p = 0; p < out.panels(); ++p) {
    uint8_t* panel = base + static_cast<size_t>(p) * out.panel_bytes_;
    std::memset(panel, 0x80, value_bytes);
    std::memset(panel + value_bytes, 0, scale_bytes);
  }
  for (int64_t r = 0; r < w.rows; ++r) {
    uint8_t* panel = base + static_cast<size_t>(r / kPanelRows) * out.panel_bytes_;
    const size_t lane = static_cast<size_t>(r % kPanelRows);
    const int8_t* row = w.values + r * w.cols;
    for (size_t g = 0; g < groups; ++g) {
      for (size_t k = 0; k < kQ8Block / 4; ++k) {
        uint8_t* dst = panel + packed_value_offset(g, k, lane);
        for (size_t i = 0; i < 4; ++i)
          dst[i] =
              static_cast<uint8_t>(static_cast<uint8_t>(row[g * kQ8Block + 4 * k + i]) ^ 0x80u);
      }
    }
    uint16_t* scales = reinterpret_cast<uint16_t*>(panel + value_bytes);
    for (size_t g = 0; g < groups; ++g) scales[g * kPanelRows + lane] = w.scales[r * groups + g];
  }
  return out;
}

void PackedInt8::unpack_row(int64_t r, int8_t* values, uint16_t* scales) const {
  if (r < 0 || r >= rows_)
    bad("PackedInt8::unpack_row: row " + std::to_string(r) + " outside [0, " +
        std::to_string(rows_) + ")");
  const size_t groups = static_cast<size_t>(cols_ / kQ8Block);
  const uint8_t* panel = bytes_.get() + static_cast<size_t>(r / kPanelRows) * panel_bytes_;
  const size_t lane = static_cast<size_t>(r % kPanelRows);
  for (size_t g = 0; g < groups; ++g) {
    for (size_t k = 0; k < kQ8Block / 4; ++k) {
      const uint8_t* src = panel + packed_value_offset(g, k, lane);
      for (size_t i = 0; i < 4; ++i)
        values[g * kQ8Block + 4 * k + i] = static_cast<int8_t>(src[i] ^ 0x80u);
    }
  }
  const uint16_t* packed_scales =
      reinterpret_cast<const uint16_t*>(panel + packed_scales_offset(groups));
  for (size_t g = 0; g < groups; ++g) scales[g] = packed_scales[g * kPanelRows + lane];
}

// Byte of value (r, c): panel r / 16, block c / 32, dword (c % 32) / 4, lane r % 16, byte c % 4.
constexpr size_t kLanes = static_cast<size_t>(kPanelRows);
constexpr size_t kBlock = static_cast<size_t>(kQ8Block);

// The 16 rows' values of one block of a panel (512 bytes: 8 lines, line k holding dword k of
// rows 0..15) written to out + j * cols (row j's 32 values): a 4 x 4 dword transpose per quarter
// line pair. Baseline x86-64 SSE2 (this part of the file is compiled once, for the baseline).
#if defined(__SSE2__)
static void unpack_block_of_16_rows(const uint8_t* block, int8_t* out, size_t cols) {
  const __m128i bias = _mm_set1_epi8(static_cast<char>(0x80));
  for (size_t half = 0; half < 2; ++half) {    // dwords k = 4 * half .. 4 * half + 3
    for (size_t quad = 0; quad < 4; ++quad) {  // rows 4 * quad .. 4 * quad + 3
      __m128i line[4];
      for (size_t i = 0; i < 4; ++i)
        line[i] = _mm_xor_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(
                                    block + (4 * half + i) * 64 + 16 * quad)),
                                bias);
      const __m128i lo01 = _mm_unpacklo_epi32(line[0], line[1]);
      const __m128i lo23 = _mm_unpacklo_epi32(line[2], line[3]);
      const __m128i hi01 = _mm_unpackhi_epi32(line[0], line[1]);
      const __m128i hi23 = _mm_unpackhi_epi32(line[2], line[3]);
      const __m128i row[4] = {_mm_unpacklo_epi64(lo01, lo23), _mm_unpackhi_epi64(lo01, lo23),
                              _mm_unpacklo_epi64(hi01, hi23), _mm_unpackhi_epi64(hi01, hi23)};
      for (size_t t = 0; t < 4; ++t)
        _mm_storeu_si128(reinterpret_cast<__m128i*>(out + (4 * quad + t) * cols + 16 * half),
                         row[t]);
    }
  }
}
#endif

void PackedInt8::unpack_rows(int64_t r0, int64_t r1, int8_t* values, uint16_t* scales) const {
  if (r0 < 0 || r0 > r1 || r1 > rows_)
    bad("PackedInt8::unpack_rows: rows [" + std::to_string(r0) + ", " + std::to_string(r1) +
        ") outside [0, " + std::to_string(rows_) + ")");
  const auto cols = static_cast<size_t>(cols_);
  const size_t groups = cols / kBlock;
  for (int64_t first = r0; first < r1;) {
    const int64_t p = first / kPanelRows;
    const int64_t last = std::min(r1, (p + 1) * kPanelRows);  // this panel's rows [first, last)
    const uint8_t* panel = bytes_.get() + static_cast<size_t>(p) * panel_bytes_;
    const auto lane0 = static_cast<size_t>(first - p * kPanelRows);
    const auto lanes = static_cast<size_t>(last - first);
    int8_t* out = values + static_cast<size_t>(first - r0) * cols;
    for (size_t g = 0; g < groups; ++g) {
      const uint8_t* block = panel + packed_value_offset(g, 0, 0);
#if defined(__SSE2__)
      if (lanes == kLanes) {
        unpack_block_of_16_rows(block, out + g * kBlock, cols);
        continue;
      }
#endif
      for (size_t k = 0; k < kBlock / 4; ++k) {
        const uint8_t* src = block + packed_value_offset(0, k, lane0);
        int8_t* dst = out + g * kBlock + 4 * k;
        for (size_t j = 0; j < lanes; ++j) {
          uint32_t word;
          std::memcpy(&word, src + 4 * j, sizeof(word));
          word ^= 0x80808080u;  // the +128 bias of every byte
          std::memcpy(dst + j * cols, &word, sizeof(word));
        }
      }
    }
    const uint16_t* packed_scales =
        reinterpret_cast<const uint16_t*>(panel + packed_scales_offset(groups));
    uint16_t* scale_out = scales + static_cast<size_t>(first - r0) * groups;
    for (size_t j = 0; j < lanes; ++j)
      for (size_t g = 0; g < groups; ++g)
        scale_out[j * groups + g] = packed_scales[g * kLanes + lane0 + j];
    first = last;
  }
}

static size_t value_byte(size_t panel_bytes, int64_t r, int64_t c) {
  const auto rr = static_cast<size_t>(r), cc = static_cast<size_t>(c);
  return rr / kLanes * panel_bytes +
         packed_value_offset(cc / kBlock, cc % kBlock / 4, rr % kLanes) + cc % 4;
}

int8_t PackedInt8::value(int64_t r, int64_t c) const {
  return static_cast<int8_t>(bytes_[value_byte(panel_bytes_, r, c)] ^ 0x80u);
}

void PackedInt8::set_value(int64_t r, int64_t c, int8_t v) {
  bytes_[value_byte(panel_bytes_, r, c)] = static_cast<uint8_t>(static_cast<uint8_t>(v) ^ 0x80u);
}

static size_t scale_byte(size_t panel_bytes, int64_t cols, int64_t r, int64_t g) {
  const auto rr = static_cast<size_t>(r);
  return rr / kLanes * panel_bytes + packed_scales_offset(static_cast<size_t>(cols) / kBlock) +
         (static_cast<size_t>(g) * kLanes + rr % kLanes) * sizeof(uint16_t);
}

uint16_t PackedInt8::scale(int64_t r, int64_t g) const {
  uint16_t bits;
  std::memcpy(&bits, bytes_.get() + scale_byte(panel_bytes_, cols_, r, g), sizeof(bits));
  return bits;
}

void PackedInt8::set_scale(int64_t r, int64_t g, uint16_t bits) {
  std::memcpy(bytes_.get() + scale_byte(panel_bytes_, cols_, r, g), &bits, sizeof(bits));
}

void PackedInt8::exchange_values(std::span<const uint64_t> positions, const int8_t* values,
                                 int8_t* old) {
  constexpr size_t kAhead = 32;  // points located and prefetched ahead of the writes
  const size_t n = positions.size();
  const auto cols = static_cast<uint64_t>(cols_);
  uint8_t* base = bytes_.get();
  size_t at[2][kAhead] = {};
  auto locate = [&](size_t from, size_t* out) {
    const size_t m = std::min(kAhead, n - from);
    for (size_t j = 0; j < m; ++j) {
      const uint64_t pos = positions[from + j];
      out[j] = value_byte(panel_bytes_, static_cast<int64_t>(pos / cols),
                          static_cast<int64_t>(pos % cols));
      __builtin_prefetch(base + out[j], 1);
    }
  };
  if (n > 0) locate(0, at[0]);
  for (size_t from = 0, b = 0; from < n; from += kAhead, b ^= 1) {
    if (from + kAhead < n) locate(from + kAhead, at[b ^ 1]);
    const size_t m = std::min(kAhead, n - from);
    for (size_t j = 0; j < m; ++j) {
      uint8_t& byte = base[at[b][j]];
      if (old) old[from + j] = static_cast<int8_t>(byte ^ 0x80u);
      byte = static_cast<uint8_t>(static_cast<uint8_t>(values[from + j]) ^ 0x80u);
    }
  }
}

bool packed_w8a8_preferred() {
  return HWY_DYNAMIC_DISPATCH(Preferred)();
}

void matmul_w8a8_packed(const PackedInt8& w, const Q8Activations& acts, float* y, int64_t y_stride,
                        int64_t row_begin, int64_t row_end) {
  if (w.empty()) bad("matmul_w8a8_packed: the packed weights are empty");
  if (row_begin < 0 || row_begin > row_end || row_end > w.rows())
    bad("matmul_w8a8_packed: row range [" + std::to_string(row_begin) + ", " +
        std::to_string(row_end) + ") is outside the " + std::to_string(w.rows()) + " weight rows");
  if (acts.cols != w.cols())
    bad("matmul_w8a8_packed: activations have " + std::to_string(acts.cols) + " cols, weights " +
        std::to_string(w.cols()));
  if (acts.batch < 0 || (acts.batch > 1 && y_stride < w.rows()))
    bad("matmul_w8a8_packed: negative batch or y_stride below the weight rows");
  if (acts.batch == 0 || row_begin == row_end) return;
  if (!y || !acts.values || !acts.scales || !acts.sums)
    bad("matmul_w8a8_packed: null buffer (the activations' block sums are required)");
  const PackedArgs a{w.data(),
                     w.panel_bytes(),
                     static_cast<size_t>(w.rows()),
                     static_cast<size_t>(w.cols()),
                     static_cast<size_t>(w.cols() / kQ8Block),
                     acts.values,
                     acts.scales,
                     acts.sums,
                     y,
                     static_cast<size_t>(y_stride),
                     static_cast<size_t>(row_begin),
                     static_cast<size_t>(row_end)};
  HWY_DYNAMIC_DISPATCH(MatmulPacked)(a, static_cast<size_t>(acts.batch));  // NaN outputs canonical
}

}  // namespace stoa::kernels
#endif  // HWY_ONCE
