// Int8-weight matmul kernels (see matmul_int8.h). Compiled once per SIMD target by Highway's
// foreach_target; the exported entry points at the bottom dispatch at run time.
//
// Structure: the output is computed in tiles of R weight rows x C activation rows. The row tiles
// are the outer loop and every batch tile is visited while the R weight rows are hot in L1, so
// the weights stream from memory once per call. Inside a tile, each weight vector is loaded and
// widened once and used for C activation rows, each activation vector is used for R weight rows.
// Up to decode-sized batches the R rows of a tile are taken far apart (R sequential weight
// streams; adjacent rows stream worse), batch 1 through 4 x 1 tiles: see AllRows.
//
// Every output element owns one accumulator vector and sees exactly the same sequence of vector
// operations whatever R and C are, so results are bit-identical across batch sizes and row
// splits (the tile shape changes only which elements are computed side by side).
#include "kernels/matmul_int8.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>

#include "kernels/arith_v2.h"
#include "kernels/half.h"
#include "kernels/matmul_int8_args.h"
#include "kernels/nan_outputs.h"
#include "kernels/native_f16.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/matmul_int8.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

HWY_BEFORE_NAMESPACE();
#include "kernels/arith_v2-inl.h"
#include "kernels/hwy_avx3_dl_vnni.h"  // IWYU pragma: keep
namespace stoa::kernels {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

constexpr bool kNativeF16 = STOA_HWY_NATIVE_F16;

constexpr size_t kBlock = 32;
constexpr size_t kScaleGroup = 8;  // weight scales are converted f16 -> f32 8 blocks at a time

// Tile shapes: R x C accumulators plus the live weight/activation vectors must fit the register
// file (16 vector registers on SSE4/AVX2, 32 on AVX-512 and NEON).
#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL || HWY_TARGET == HWY_NEON
constexpr size_t kRowsA32 = 4, kColsA32 = 4;
constexpr size_t kRowsA8 = 4, kColsA8 = 4;
#elif HWY_TARGET == HWY_AVX2
constexpr size_t kRowsA32 = 4, kColsA32 = 2;
constexpr size_t kRowsA8 = 3, kColsA8 = 2;
#else
constexpr size_t kRowsA32 = 2, kColsA32 = 2;
constexpr size_t kRowsA8 = 2, kColsA8 = 2;
#endif

constexpr size_t kStreams = 4;           // batch 1: rows far apart walked side by side (AllRows)
constexpr size_t kFarRowsMaxBatch = 32;  // batched tiles take far-apart rows up to this batch

// At most 16 f32 lanes so that a 32-value block is a whole number of vectors.
using DF = hn::CappedTag<float, 16>;

// Converts n (<= kScaleGroup) f16 scales to f32.
HWY_INLINE void ScalesToF32(const uint16_t* HWY_RESTRICT src, float* HWY_RESTRICT dst, size_t n) {
  const hn::CappedTag<float, kScaleGroup> df;
  const hn::Rebind<hwy::float16_t, decltype(df)> dh;
  const size_t lanes = hn::Lanes(df);
  size_t i = 0;
  for (; kNativeF16 && i + lanes <= n; i += lanes) {
    hn::StoreU(hn::PromoteTo(df, hn::LoadU(dh, reinterpret_cast<const hwy::float16_t*>(src + i))),
               df, dst + i);
  }
  for (; i < n; ++i) dst[i] = f16_bits_to_f32(src[i]);
}

// The f32 scales of the chunk of blocks from g0 (at most kScaleGroup) for a tile's R weight rows,
// `step` rows apart: dw[r][g] scales block g0 + g of row r. Returns how many blocks the chunk
// holds. Shared by every tile so that the scale layout is read in one place; always inlined.
template <size_t R>
HWY_INLINE size_t TileScalesToF32(const uint16_t* HWY_RESTRICT ws, size_t step, size_t groups,
                                  size_t g0, float (&dw)[R][kScaleGroup]) {
  const size_t ng = std::min(kScaleGroup, groups - g0);
  for (size_t r = 0; r < R; ++r) ScalesToF32(ws + r * step * groups + g0, dw[r], ng);
  return ng;
}

// Y[c, r] for R weight rows starting at w (row stride cols) and C activation rows starting at x.
template <size_t R, size_t C>
HWY_INLINE void TileW8A32(const Args32& a, size_t row, size_t b, size_t step) {
  const DF df;
  const hn::Rebind<int32_t, DF> di32;
  const hn::Rebind<int8_t, DF> di8;
  const size_t lanes = hn::Lanes(df);
  using V = hn::Vec<DF>;
  const size_t groups = a.cols / kBlock;
  const int8_t* HWY_RESTRICT w = a.w + row * a.cols;
  const uint16_t* HWY_RESTRICT ws = a.ws + row * groups;
  const float* HWY_RESTRICT x = a.x + b * a.x_stride;

  V acc[R][C];
  for (size_t r = 0; r < R; ++r)
    for (size_t c = 0; c < C; ++c) acc[r][c] = hn::Zero(df);
  HWY_ALIGN float dw[R][kScaleGroup];
  for (size_t g0 = 0; g0 < groups; g0 += kScaleGroup) {
    const size_t ng = TileScalesToF32(ws, step, groups, g0, dw);
    for (size_t g = 0; g < ng; ++g) {
      const size_t col0 = (g0 + g) * kBlock;
      for (size_t k = 0; k < kBlock; k += lanes) {
        const size_t col = col0 + k;
        V xv[C];
        for (size_t c = 0; c < C; ++c) xv[c] = hn::LoadU(df, x + c * a.x_stride + col);
        for (size_t r = 0; r < R; ++r) {
          const V wv = hn::Mul(
              hn::ConvertTo(df, hn::PromoteTo(di32, hn::LoadU(di8, w + r * step * a.cols + col))),
              hn::Set(df, dw[r][g]));
          for (size_t c = 0; c < C; ++c) acc[r][c] = hn::MulAdd(wv, xv[c], acc[r][c]);
        }
      }
    }
  }
  for (size_t r = 0; r < R; ++r)
    for (size_t c = 0; c < C; ++c)
      a.y[(b + c) * a.y_stride + row + r * step] = hn::GetLane(hn::SumOfLanes(df, acc[r][c]));
}

#if HWY_TARGET == HWY_SCALAR
// One-lane vectors cannot hold int16 pairs, so the scalar target states the same arithmetic in
// plain C++: an exact int32 block sum, then one f32 multiply-add per block.
template <size_t R, size_t C>
HWY_INLINE void TileW8A8(const Args8& a, size_t row, size_t b, size_t step) {
  const size_t groups = a.cols / kBlock;
  for (size_t r = 0; r < R; ++r) {
    for (size_t c = 0; c < C; ++c) {
      const int8_t* w = a.w + (row + r * step) * a.cols;
      const int8_t* xq = a.xq + (b + c) * a.cols;
      float acc = 0.0f;
      for (size_t g = 0; g < groups; ++g) {
        int32_t isum = 0;
        for (size_t i = g * kBlock; i < (g + 1) * kBlock; ++i) isum += int32_t{w[i]} * xq[i];
        const float scale =
            f16_bits_to_f32(a.ws[(row + r * step) * groups + g]) * a.xd[(b + c) * groups + g];
        acc = acc + static_cast<float>(isum) * scale;  // v2: rounded product, then add
      }
      a.y[(b + c) * a.y_stride + row + r * step] = acc;
    }
  }
}
#elif HWY_TARGET == HWY_AVX3_DL
// The exact int32 sum of 8 lanes (any order: integers).
HWY_INLINE int32_t SumOf8(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
  return _mm_cvtsi128_si32(s);
}

// VNNI (Ice Lake, Zen 4): vpdpbusd multiplies unsigned by signed bytes and adds each group of 4
// products into an int32 lane: 64 products per instruction, i.e. two blocks, lanes 0-7 holding
// exact partial sums of the first block and lanes 8-15 of the second. The WEIGHTS are made
// unsigned with a bias of 128 (w ^ 0x80, which also maps -128 to 0 correctly); the bias then
// contributes 128 * sum(x), which depends on the activations only: the accumulation starts from
// -128 * sum(x), one vpdpbusd per activation row and block pair, shared by all R weight rows
// (same exact integer sums, so the same bits). Each block's exact sum then enters the shared
// per-output formula (see TileW8A8 on SCALAR). An odd last block is loaded under a mask.
// (No software prefetch: at batch 1 and decode-sized batches the rows are walked as a few
// sequential streams, which the hardware prefetchers follow; prefetching measured no better.)
template <size_t R, size_t C>
HWY_INLINE void TileW8A8(const Args8& a, size_t row, size_t b, size_t step) {
  const size_t groups = a.cols / kBlock;
  const int8_t* HWY_RESTRICT w = a.w + row * a.cols;
  const uint16_t* HWY_RESTRICT ws = a.ws + row * groups;
  const int8_t* HWY_RESTRICT xq = a.xq + b * a.cols;
  const float* HWY_RESTRICT xd = a.xd + b * groups;
  const __m512i bias = _mm512_set1_epi8(static_cast<char>(0x80));
  const __m512i zero = _mm512_setzero_si512();

  float acc[R][C] = {};
  HWY_ALIGN float dw[R][kScaleGroup];
  for (size_t g0 = 0; g0 < groups; g0 += kScaleGroup) {
    const size_t ng = TileScalesToF32(ws, step, groups, g0, dw);
    for (size_t g = 0; g < ng; g += 2) {
      const bool pair = g + 1 < ng;
      const __mmask64 mask = pair ? ~__mmask64{0} : __mmask64{0xffffffffu};
      const size_t col = (g0 + g) * kBlock;
      __m512i xv[C];
      __m512i neg_bias_sum[C];
      for (size_t c = 0; c < C; ++c) {
        xv[c] = _mm512_maskz_loadu_epi8(mask, xq + c * a.cols + col);
        neg_bias_sum[c] = _mm512_sub_epi32(zero, _mm512_dpbusd_epi32(zero, bias, xv[c]));
      }
      for (size_t r = 0; r < R; ++r) {
        const __m512i wu =
            _mm512_xor_si512(_mm512_maskz_loadu_epi8(mask, w + r * step * a.cols + col), bias);
        for (size_t c = 0; c < C; ++c) {
          const __m512i isum = _mm512_dpbusd_epi32(neg_bias_sum[c], wu, xv[c]);
          const float* dx = xd + c * groups + g0 + g;
          acc[r][c] = acc[r][c] +
                      static_cast<float>(SumOf8(_mm512_castsi512_si256(isum))) * (dw[r][g] * dx[0]);
          if (pair)
            acc[r][c] = acc[r][c] + static_cast<float>(SumOf8(_mm512_extracti64x4_epi64(isum, 1))) *
                                        (dw[r][g + 1] * dx[1]);
        }
      }
    }
  }
  for (size_t r = 0; r < R; ++r)
    for (size_t c = 0; c < C; ++c) a.y[(b + c) * a.y_stride + row + r * step] = acc[r][c];
}
#else
template <size_t R, size_t C>
HWY_INLINE void TileW8A8(const Args8& a, size_t row, size_t b, size_t step) {
  const hn::Rebind<int32_t, DF> di32;
  const hn::Repartition<int16_t, decltype(di32)> di16;  // twice the lanes of di32
  const hn::Rebind<int8_t, decltype(di16)> di8;
  const size_t lanes16 = hn::Lanes(di16);
  const size_t chunks = kBlock / lanes16;
  using VI = hn::Vec<decltype(di32)>;
  using V16 = hn::Vec<decltype(di16)>;
  const size_t groups = a.cols / kBlock;
  const int8_t* HWY_RESTRICT w = a.w + row * a.cols;
  const uint16_t* HWY_RESTRICT ws = a.ws + row * groups;
  const int8_t* HWY_RESTRICT xq = a.xq + b * a.cols;
  const float* HWY_RESTRICT xd = a.xd + b * groups;

  float acc[R][C] = {};
  HWY_ALIGN float dw[R][kScaleGroup];
  for (size_t g0 = 0; g0 < groups; g0 += kScaleGroup) {
    const size_t ng = TileScalesToF32(ws, step, groups, g0, dw);
    for (size_t g = 0; g < ng; ++g) {
      const size_t col0 = (g0 + g) * kBlock;
      // The block's exact int32 sum enters the shared per-output formula (TileW8A8 on SCALAR).
      const auto add_block = [&](float& out, VI isum, float d_w, float d_x) {
        const int32_t sum = hn::GetLane(hn::SumOfLanes(di32, isum));
        out = out + static_cast<float>(sum) * (d_w * d_x);
      };
      if (chunks == 1) {
        // One vector per block (AVX-512): the integer block sum is formed and consumed at once.
        V16 xv[C];
        for (size_t c = 0; c < C; ++c)
          xv[c] = hn::PromoteTo(di16, hn::LoadU(di8, xq + c * a.cols + col0));
        for (size_t r = 0; r < R; ++r) {
          const V16 wv = hn::PromoteTo(di16, hn::LoadU(di8, w + r * step * a.cols + col0));
          for (size_t c = 0; c < C; ++c) {
            VI odd = hn::Zero(di32);
            VI isum = hn::ReorderWidenMulAccumulate(di32, wv, xv[c], hn::Zero(di32), odd);
            add_block(acc[r][c], hn::RearrangeToOddPlusEven(isum, odd), dw[r][g],
                      xd[c * groups + g0 + g]);
          }
        }
      } else {
        VI isum[R][C], odd[R][C];
        for (size_t r = 0; r < R; ++r)
          for (size_t c = 0; c < C; ++c) isum[r][c] = odd[r][c] = hn::Zero(di32);
        for (size_t k = 0; k < chunks; ++k) {
          const size_t col = col0 + k * lanes16;
          V16 xv[C];
          for (size_t c = 0; c < C; ++c)
            xv[c] = hn::PromoteTo(di16, hn::LoadU(di8, xq + c * a.cols + col));
          for (size_t r = 0; r < R; ++r) {
            const V16 wv = hn::PromoteTo(di16, hn::LoadU(di8, w + r * step * a.cols + col));
            for (size_t c = 0; c < C; ++c)
              isum[r][c] = hn::ReorderWidenMulAccumulate(di32, wv, xv[c], isum[r][c], odd[r][c]);
          }
        }
        for (size_t r = 0; r < R; ++r)
          for (size_t c = 0; c < C; ++c)
            add_block(acc[r][c], hn::RearrangeToOddPlusEven(isum[r][c], odd[r][c]), dw[r][g],
                      xd[c * groups + g0 + g]);
      }
    }
  }
  for (size_t r = 0; r < R; ++r)
    for (size_t c = 0; c < C; ++c) a.y[(b + c) * a.y_stride + row + r * step] = acc[r][c];
}
#endif  // HWY_TARGET == HWY_SCALAR

// Visits every batch tile for the R rows row, row + step, ... (the weights stay in L1 meanwhile).
template <size_t R, size_t C, class Args, class TileFn>
HWY_INLINE void AllBatchTiles(const Args& a, size_t row, size_t batch, size_t step) {
  size_t b = 0;
  for (; b + C <= batch; b += C) TileFn::template Run<R, C>(a, row, b, step);
  const size_t rest = batch - b;
  if constexpr (C > 1) {
    if (rest == 1) TileFn::template Run<R, 1>(a, row, b, step);
  }
  if constexpr (C > 2) {
    if (rest == 2) TileFn::template Run<R, 2>(a, row, b, step);
  }
  if constexpr (C > 3) {
    if (rest == 3) TileFn::template Run<R, 3>(a, row, b, step);
  }
  static_assert(C <= 4, "tile batch width above 4 needs more remainder cases");
}

template <size_t kR, size_t kC, class Args, class TileFn>
HWY_INLINE void AllRows(const Args& a, size_t row_begin, size_t row_end, size_t batch) {
  size_t row = row_begin;
  if (batch == 1) {
    // A GEMV streams the weights from DRAM once and is bound by how they are walked, not by
    // instructions. Each row is read front to back, and kStreams rows FAR APART (the range cut
    // in kStreams contiguous parts, row i of every part side by side in one tile with a row
    // step) advance together: kStreams independent sequential streams, which the hardware
    // prefetchers follow, with the activation-side work shared. Adjacent rows side by side
    // (the batched tiles' R interleaved streams 1 row apart) stream far worse. Measured on one
    // decode token of bench-qwen3, 1 thread, AVX3_DL (tests/kernels/kernels_speed, GB/s of
    // weights per CPU-second): tiles of 2-8 adjacent rows 10-12; 1 row at a time 17-20 (AVX2:
    // 17-19, its 8-row tile 7); 2 / 3 / 4 / 6 / 8 far-apart streams 21-22 / 25-26 / 23-27 /
    // 21-22 / 18. A single read-only stream of the same bytes: 25. Same tile code (a row step
    // changes only the addresses), so the same bits as every other path.
    const size_t part = (row_end - row_begin) / kStreams;
    for (size_t i = 0; i < part; ++i) TileFn::template Run<kStreams, 1>(a, row_begin + i, 0, part);
    for (row = row_begin + kStreams * part; row < row_end; ++row)
      TileFn::template Run<1, 1>(a, row, 0, 1);
    return;
  }
  if (batch <= kFarRowsMaxBatch) {
    // Decode-sized batches are still bound by the weight stream: the tile's R rows are taken
    // far apart as well (R sequential streams). Measured (kernels_speed, bench-qwen3 token,
    // 1 thread, AVX3_DL, CPU ms adjacent -> far): b2 16 -> 6.5, b4 19 -> 11, b8 27.5 -> 19.5,
    // b16 44 -> 36.6, b32 79 -> 72, b64 146 -> 146, b128 (prefill) 284 -> 295.
    const size_t part = (row_end - row_begin) / kR;
    for (size_t i = 0; i < part; ++i)
      AllBatchTiles<kR, kC, Args, TileFn>(a, row_begin + i, batch, part);
    row = row_begin + kR * part;
  } else {
    for (; row + kR <= row_end; row += kR) AllBatchTiles<kR, kC, Args, TileFn>(a, row, batch, 1);
  }
  for (; row < row_end; ++row) AllBatchTiles<1, kC, Args, TileFn>(a, row, batch, 1);
}

struct RunA32 {
  template <size_t R, size_t C>
  static HWY_INLINE void Run(const Args32& a, size_t row, size_t b, size_t step) {
    TileW8A32<R, C>(a, row, b, step);
  }
};
struct RunA8 {
  template <size_t R, size_t C>
  static HWY_INLINE void Run(const Args8& a, size_t row, size_t b, size_t step) {
    TileW8A8<R, C>(a, row, b, step);
  }
};

void MatmulW8A32(const Args32& a, size_t row_begin, size_t row_end, size_t batch) {
  AllRows<kRowsA32, kColsA32, Args32, RunA32>(a, row_begin, row_end, batch);
}

void MatmulW8A8(const Args8& a, size_t row_begin, size_t row_end, size_t batch) {
  AllRows<kRowsA8, kColsA8, Args8, RunA8>(a, row_begin, row_end, batch);
}

// Per 32-block, engine arithmetic v2 (kernels::v2::quantize_q8 is the reference, bit for bit):
// the inputs tiny-flushed, amax taken on the bits (exact), dd = flush(amax * fl(1/127)) stored
// rounded to f16 (as llama.cpp stores it), id = v2::recip(dd), q = round half away from zero of
// x * id, clamped to 127. A block holding a NaN or an infinity gets scale NaN and values 0.
// A row goes in runs of up to kRun blocks: first every block's amax, then dd and id for the
// whole run as vectors (v2's reciprocal is ~25 float operations: one scalar call per block was
// most of this kernel's time), then the values.
void QuantizeQ8(const float* HWY_RESTRICT x, size_t x_stride, size_t batch, size_t cols,
                int8_t* HWY_RESTRICT q, float* HWY_RESTRICT d, int32_t* HWY_RESTRICT sums) {
  constexpr float kInv127 = 0.00787401574803149606f;
  constexpr size_t kRun = 64;
  const DF df;
  const hn::Rebind<int32_t, DF> di32;
  const hn::Rebind<int8_t, DF> di8;
  const size_t lanes = hn::Lanes(df);
  const size_t groups = cols / kBlock;
  const auto abs_mask = hn::Set(di32, 0x7fffffff);
  const auto above_tiny = hn::Set(di32, 0x00800001);  // |x| < this: tiny
  const auto half = hn::Set(df, 0.5f);
  const auto one = hn::Set(di32, 1);
  const auto q_max = hn::Set(di32, 127);
  // x with |x| <= 2^-126 made +0 (v2::flush; NaN blocks never reach the values).
  const auto flushed = [&](hn::Vec<DF> v) {
    const auto mag = hn::And(hn::BitCast(di32, v), abs_mask);
    return hn::IfThenZeroElse(hn::RebindMask(df, hn::Lt(mag, above_tiny)), v);
  };
  HWY_ALIGN int32_t amax_bits[kRun];
  HWY_ALIGN float dd[kRun], id[kRun];
  for (size_t b = 0; b < batch; ++b) {
    const float* row = x + b * x_stride;
    for (size_t g0 = 0; g0 < groups; g0 += kRun) {
      const size_t run = std::min(kRun, groups - g0);
      for (size_t i = 0; i < run; ++i) {
        const float* blk = row + (g0 + i) * kBlock;
        auto vmax = hn::Zero(di32);
        for (size_t k = 0; k < kBlock; k += lanes) {
          const auto mag = hn::And(hn::BitCast(di32, hn::LoadU(df, blk + k)), abs_mask);
          vmax = hn::Max(vmax, hn::IfThenZeroElse(hn::Lt(mag, above_tiny), mag));
        }
        amax_bits[i] = hn::GetLane(hn::MaxOfLanes(di32, vmax));
      }
      for (size_t i = run; i < kRun; ++i) amax_bits[i] = 0;
      // dd = flush(amax * fl(1/127)); id = recip(dd), 0 where dd is 0. Lanes of a NaN or
      // infinite block compute garbage that the values' loop below never reads.
      for (size_t i = 0; i < kRun; i += lanes) {
        const auto amax = hn::BitCast(df, hn::Load(di32, amax_bits + i));
        const auto vdd = v2v::Flush(df, hn::Mul(amax, hn::Set(df, kInv127)));
        const auto zero = hn::Eq(vdd, hn::Zero(df));
        hn::Store(vdd, df, dd + i);
        hn::Store(hn::IfThenZeroElse(zero, v2v::Divide(df, hn::Set(df, 1.0f), vdd)), df, id + i);
      }
      for (size_t i = 0; i < run; ++i) {
        const size_t g = g0 + i;
        const float* blk = row + g * kBlock;
        int8_t* qb = q + b * cols + g * kBlock;
        const size_t at = b * groups + g;
        if (amax_bits[i] >= 0x7f800000) {
          std::fill(qb, qb + kBlock, int8_t{0});
          d[at] = v2::flush(std::numeric_limits<float>::quiet_NaN());
          if (sums) sums[at] = 0;
          continue;
        }
        d[at] = f16_bits_to_f32(f32_to_f16_bits(dd[i]));
        const auto vid = hn::Set(df, id[i]);
        auto block_sum = hn::Zero(di32);
        for (size_t k = 0; k < kBlock; k += lanes) {
          const auto t = hn::Mul(flushed(hn::LoadU(df, blk + k)), vid);
          const auto mag = hn::Abs(t);
          // Truncation is exact below 2^31, and so is the fraction mag - trunc(mag).
          auto qi = hn::ConvertTo(di32, mag);
          const auto frac = hn::Sub(mag, hn::ConvertTo(df, qi));
          qi = hn::Min(
              hn::Add(qi, hn::IfThenElseZero(hn::RebindMask(di32, hn::Ge(frac, half)), one)),
              q_max);
          const auto negative = hn::Lt(hn::BitCast(di32, t), hn::Zero(di32));
          qi = hn::IfThenElse(negative, hn::Neg(qi), qi);
          hn::StoreU(hn::DemoteTo(di8, qi), di8, qb + k);
          block_sum = hn::Add(block_sum, qi);
        }
        if (sums) sums[at] = hn::GetLane(hn::SumOfLanes(di32, block_sum));
      }
    }
  }
}

void DequantizeRow(const int8_t* HWY_RESTRICT q, const uint16_t* HWY_RESTRICT scales, size_t cols,
                   float* HWY_RESTRICT out) {
  const DF df;
  const hn::Rebind<int32_t, DF> di32;
  const hn::Rebind<int8_t, DF> di8;
  const size_t lanes = hn::Lanes(df);
  for (size_t g = 0; g < cols / kBlock; ++g) {
    const auto d = hn::Set(df, f16_bits_to_f32(scales[g]));
    for (size_t k = g * kBlock; k < (g + 1) * kBlock; k += lanes)
      hn::StoreU(hn::Mul(hn::ConvertTo(df, hn::PromoteTo(di32, hn::LoadU(di8, q + k))), d), df,
                 out + k);
  }
}

int64_t Target() {
  return HWY_TARGET;
}

}  // namespace HWY_NAMESPACE
}  // namespace stoa::kernels
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace stoa::kernels {

HWY_EXPORT(MatmulW8A32);
HWY_EXPORT(MatmulW8A8);
HWY_EXPORT(QuantizeQ8);
HWY_EXPORT(Target);
HWY_EXPORT(DequantizeRow);

int64_t matmul_dispatch_target() {
  return HWY_DYNAMIC_DISPATCH(Target)();
}

namespace {

[[noreturn]] void bad(const std::string& what) {
  throw std::invalid_argument(what);
}

void check_weights(const char* fn, const Int8Weights& w, int64_t row_begin, int64_t row_end) {
  if (w.cols <= 0 || w.cols % kQ8Block != 0)
    bad(std::string(fn) + ": weight cols " + std::to_string(w.cols) +
        " is not a positive multiple of 32");
  if (w.rows < 0 || !w.values || !w.scales)
    bad(std::string(fn) + ": weight view is empty or has negative rows");
  if (row_begin < 0 || row_begin > row_end || row_end > w.rows)
    bad(std::string(fn) + ": row range [" + std::to_string(row_begin) + ", " +
        std::to_string(row_end) + ") is outside the " + std::to_string(w.rows) + " weight rows");
}

}  // namespace

void quantize_activations_q8(const float* x, int64_t x_stride, const Q8Activations& acts) {
  if (acts.cols <= 0 || acts.cols % kQ8Block != 0)
    bad("quantize_activations_q8: cols " + std::to_string(acts.cols) +
        " is not a positive multiple of 32");
  if (acts.batch < 0 || x_stride < acts.cols)
    bad("quantize_activations_q8: negative batch or x_stride below cols");
  if (acts.batch == 0) return;
  if (!x || !acts.values || !acts.scales) bad("quantize_activations_q8: null buffer");
  HWY_DYNAMIC_DISPATCH(QuantizeQ8)
  (x, static_cast<size_t>(x_stride), static_cast<size_t>(acts.batch),
   static_cast<size_t>(acts.cols), acts.values, acts.scales, acts.sums);
}

void matmul_w8a8(const Int8Weights& w, const Q8Activations& acts, float* y, int64_t y_stride,
                 int64_t row_begin, int64_t row_end) {
  check_weights("matmul_w8a8", w, row_begin, row_end);
  if (acts.cols != w.cols)
    bad("matmul_w8a8: activations have " + std::to_string(acts.cols) + " cols, weights " +
        std::to_string(w.cols));
  if (acts.batch < 0 || (acts.batch > 1 && y_stride < w.rows))
    bad("matmul_w8a8: negative batch or y_stride below the weight rows");
  if (acts.batch == 0 || row_begin == row_end) return;
  if (!y || !acts.values || !acts.scales) bad("matmul_w8a8: null buffer");
  const Args8 a{w.values,    w.scales, static_cast<size_t>(w.cols),  acts.values,
                acts.scales, y,        static_cast<size_t>(y_stride)};
  HWY_DYNAMIC_DISPATCH(MatmulW8A8)
  (a, static_cast<size_t>(row_begin), static_cast<size_t>(row_end),
   static_cast<size_t>(acts.batch));
  canonicalize_nan_outputs(y, y_stride, acts.batch, row_begin, row_end);
}

void dequantize_q8_row(const Int8Weights& w, int64_t row, float* out) {
  check_weights("dequantize_q8_row", w, 0, w.rows);
  if (row < 0 || row >= w.rows)
    bad("dequantize_q8_row: row " + std::to_string(row) + " is outside the " +
        std::to_string(w.rows) + " weight rows");
  if (!out) bad("dequantize_q8_row: null output");
  HWY_DYNAMIC_DISPATCH(DequantizeRow)
  (w.values + row * w.cols, w.scales + row * (w.cols / kQ8Block), static_cast<size_t>(w.cols), out);
}

void matmul_w8a32(const Int8Weights& w, const float* x, int64_t x_stride, int64_t batch, float* y,
                  int64_t y_stride, int64_t row_begin, int64_t row_end) {
  check_weights("matmul_w8a32", w, row_begin, row_end);
  if (batch < 0 || (batch > 1 && (y_stride < w.rows || x_stride < w.cols)))
    bad("matmul_w8a32: negative batch, x_stride below cols or y_stride below the weight rows");
  if (batch == 0 || row_begin == row_end) return;
  if (!x || !y) bad("matmul_w8a32: null buffer");
  const Args32 a{w.values,
                 w.scales,
                 static_cast<size_t>(w.cols),
                 x,
                 static_cast<size_t>(x_stride),
                 y,
                 static_cast<size_t>(y_stride)};
  HWY_DYNAMIC_DISPATCH(MatmulW8A32)
  (a, static_cast<size_t>(row_begin), static_cast<size_t>(row_end), static_cast<size_t>(batch));
}

}  // namespace stoa::kernels
#endif  // HWY_ONCE
