// SDOT / SMMLA kernels for the packed W8A8 layout (see matmul_int8_arm.h, matmul_int8_packed.h).
//
// The packed layout was made for x86's vpdpbusd, and it is what SDOT's by-broadcast form wants as
// well: a 16-byte load at packed_value_offset(g, k, 4q) holds values 4k..4k+3 of rows 4q..4q+3,
// so SDOT against the activations' dword k broadcast adds each row's 4 products into its own
// int32 lane. The bytes are stored +128 (vpdpbusd's unsigned operand); XOR 0x80 gives the signed
// value back, so no bias correction is needed. For SMMLA (2x8 by 8x2 bytes -> 2x2 int32), the two
// dwords k = 2m, 2m + 1 of rows 4q..4q+3 interleaved (ZIP1 / ZIP2 on 32-bit lanes) are rows
// 4q, 4q+1 (and 4q+2, 4q+3) with 8 consecutive values each: the 2x8 weight operand; the
// activation operand is 8 values of two activation rows. Same exact integer block sums either
// way; then per output, per block in order, acc = acc + float(isum) * (f32(d_w) * d_x), the product
// rounded before the add (engine arithmetic v2, docs/design/arithmetic.md: never fused).
#include "kernels/matmul_int8_arm.h"

#include <algorithm>
#include <cstring>

#include "kernels/half.h"
#include "kernels/matmul_int8_packed_args.h"

#if defined(__aarch64__)
#include <arm_neon.h>
#if defined(__linux__)
#include <sys/auxv.h>
#elif defined(__APPLE__)
#include <sys/sysctl.h>
#endif
#endif

namespace stoa::kernels {

namespace {

ArmInt8Dot g_cap = ArmInt8Dot::kSmmla;

#if defined(__aarch64__)

// Functions using the extensions are compiled for them; they run only where the CPU reports them.
#if defined(__clang__)
#define STOA_TARGET_DOTPROD __attribute__((target("dotprod")))
#define STOA_TARGET_I8MM __attribute__((target("dotprod,i8mm")))
#else
#define STOA_TARGET_DOTPROD __attribute__((target("arch=armv8.2-a+dotprod")))
#define STOA_TARGET_I8MM __attribute__((target("arch=armv8.2-a+dotprod+i8mm")))
#endif

ArmInt8Dot cpu_int8_dot() {
#if defined(__linux__)
  // Linux's hwcap bits (asm/hwcap.h), spelled out for older headers.
  constexpr unsigned long kHwcapAsimdDp = 1ul << 20;
  constexpr unsigned long kHwcap2I8mm = 1ul << 13;
  const unsigned long hwcap = getauxval(AT_HWCAP), hwcap2 = getauxval(AT_HWCAP2);
  if (!(hwcap & kHwcapAsimdDp)) return ArmInt8Dot::kNone;
  return (hwcap2 & kHwcap2I8mm) ? ArmInt8Dot::kSmmla : ArmInt8Dot::kSdot;
#elif defined(__APPLE__)
  auto has = [](const char* name) {
    int value = 0;
    size_t size = sizeof(value);
    return sysctlbyname(name, &value, &size, nullptr, 0) == 0 && value != 0;
  };
  if (!has("hw.optional.arm.FEAT_DotProd")) return ArmInt8Dot::kNone;
  return has("hw.optional.arm.FEAT_I8MM") ? ArmInt8Dot::kSmmla : ArmInt8Dot::kSdot;
#else
  return ArmInt8Dot::kNone;
#endif
}

constexpr size_t kBlock = 32;
constexpr size_t kPanel = 16;

// The panel's 16 f32 weight scales of block g (f16 -> f32 is exact on every path).
inline void panel_scales(const uint8_t* panel, size_t groups, size_t g, float* out) {
  const auto* scales = reinterpret_cast<const uint16_t*>(panel + packed_scales_offset(groups));
  for (size_t j = 0; j < kPanel; ++j) out[j] = f16_bits_to_f32(scales[g * kPanel + j]);
}

// Writes the panel's outputs that fall in [row_begin, row_end) and inside the matrix.
inline void store_panel(const PackedArgs& a, size_t panel, size_t b, const float* out) {
  const size_t row0 = panel * kPanel;
  const size_t lo = std::max(row0, a.row_begin);
  const size_t hi = std::min({row0 + kPanel, a.row_end, a.rows});
  for (size_t r = lo; r < hi; ++r) a.y[b * a.y_stride + r] = out[r - row0];
}

// One panel (16 rows) x C activation rows from b: 4 x C int32 block sums, 4 x C f32 accumulators.
template <size_t C>
STOA_TARGET_DOTPROD void sdot_panel(const PackedArgs& a, size_t panel, size_t b) {
  const uint8_t* pw = a.w + panel * a.panel_bytes;
  const uint8x16_t bias = vdupq_n_u8(0x80);
  float32x4_t acc[4][C];
  for (size_t q = 0; q < 4; ++q)
    for (size_t c = 0; c < C; ++c) acc[q][c] = vdupq_n_f32(0.0f);
  for (size_t g = 0; g < a.groups; ++g) {
    int32x4_t isum[4][C];
    for (size_t q = 0; q < 4; ++q)
      for (size_t c = 0; c < C; ++c) isum[q][c] = vdupq_n_s32(0);
    for (size_t k = 0; k < kBlock / 4; ++k) {
      int8x16_t xb[C];
      for (size_t c = 0; c < C; ++c) {
        int32_t quad;
        std::memcpy(&quad, a.xq + (b + c) * a.cols + g * kBlock + 4 * k, sizeof(quad));
        xb[c] = vreinterpretq_s8_s32(vdupq_n_s32(quad));
      }
      for (size_t q = 0; q < 4; ++q) {
        const int8x16_t wv =
            vreinterpretq_s8_u8(veorq_u8(vld1q_u8(pw + packed_value_offset(g, k, 4 * q)), bias));
        for (size_t c = 0; c < C; ++c) isum[q][c] = vdotq_s32(isum[q][c], wv, xb[c]);
      }
    }
    float sw[kPanel];
    panel_scales(pw, a.groups, g, sw);
    for (size_t c = 0; c < C; ++c) {
      const float32x4_t dx = vdupq_n_f32(a.xd[(b + c) * a.groups + g]);
      for (size_t q = 0; q < 4; ++q)
        acc[q][c] = vaddq_f32(
            acc[q][c], vmulq_f32(vcvtq_f32_s32(isum[q][c]), vmulq_f32(vld1q_f32(sw + 4 * q), dx)));
    }
  }
  for (size_t c = 0; c < C; ++c) {
    float out[kPanel];
    for (size_t q = 0; q < 4; ++q) vst1q_f32(out + 4 * q, acc[q][c]);
    store_panel(a, panel, b + c, out);
  }
}

STOA_TARGET_DOTPROD void sdot_columns(const PackedArgs& a, size_t panel, size_t b, size_t n) {
  for (; n >= 3; b += 3, n -= 3) sdot_panel<3>(a, panel, b);
  if (n == 2) sdot_panel<2>(a, panel, b);
  if (n == 1) sdot_panel<1>(a, panel, b);
}

// One panel x the activation rows b, b + 1: 8 row pairs, each one 2x2 SMMLA accumulator whose
// lanes are (row 2i, b), (row 2i, b+1), (row 2i+1, b), (row 2i+1, b+1).
STOA_TARGET_I8MM void smmla_panel_pair(const PackedArgs& a, size_t panel, size_t b) {
  const uint8_t* pw = a.w + panel * a.panel_bytes;
  const int8_t* x0 = a.xq + b * a.cols;
  const int8_t* x1 = x0 + a.cols;
  const uint8x16_t bias = vdupq_n_u8(0x80);
  float32x4_t acc[8];
  for (auto& v : acc) v = vdupq_n_f32(0.0f);
  for (size_t g = 0; g < a.groups; ++g) {
    int32x4_t isum[8];
    for (auto& v : isum) v = vdupq_n_s32(0);
    for (size_t m = 0; m < kBlock / 8; ++m) {
      const int8x16_t xv =
          vcombine_s8(vld1_s8(x0 + g * kBlock + 8 * m), vld1_s8(x1 + g * kBlock + 8 * m));
      for (size_t q = 0; q < 4; ++q) {
        const int32x4_t lo = vreinterpretq_s32_u8(
            veorq_u8(vld1q_u8(pw + packed_value_offset(g, 2 * m, 4 * q)), bias));
        const int32x4_t hi = vreinterpretq_s32_u8(
            veorq_u8(vld1q_u8(pw + packed_value_offset(g, 2 * m + 1, 4 * q)), bias));
        isum[2 * q] = vmmlaq_s32(isum[2 * q], vreinterpretq_s8_s32(vzip1q_s32(lo, hi)), xv);
        isum[2 * q + 1] = vmmlaq_s32(isum[2 * q + 1], vreinterpretq_s8_s32(vzip2q_s32(lo, hi)), xv);
      }
    }
    float sw[kPanel];
    panel_scales(pw, a.groups, g, sw);
    const float dx0 = a.xd[b * a.groups + g], dx1 = a.xd[(b + 1) * a.groups + g];
    const float dx_lanes[4] = {dx0, dx1, dx0, dx1};
    const float32x4_t dx = vld1q_f32(dx_lanes);
    for (size_t i = 0; i < 8; ++i) {
      const float dw_lanes[4] = {sw[2 * i], sw[2 * i], sw[2 * i + 1], sw[2 * i + 1]};
      acc[i] =
          vaddq_f32(acc[i], vmulq_f32(vcvtq_f32_s32(isum[i]), vmulq_f32(vld1q_f32(dw_lanes), dx)));
    }
  }
  float out0[kPanel], out1[kPanel];
  for (size_t i = 0; i < 8; ++i) {
    float lanes[4];
    vst1q_f32(lanes, acc[i]);
    out0[2 * i] = lanes[0];
    out1[2 * i] = lanes[1];
    out0[2 * i + 1] = lanes[2];
    out1[2 * i + 1] = lanes[3];
  }
  store_panel(a, panel, b, out0);
  store_panel(a, panel, b + 1, out1);
}

STOA_TARGET_I8MM void smmla_columns(const PackedArgs& a, size_t panel, size_t batch) {
  size_t b = 0;
  for (; b + 2 <= batch; b += 2) smmla_panel_pair(a, panel, b);
  if (b < batch) sdot_panel<1>(a, panel, b);  // an odd last row: SMMLA would waste half
}

#else
ArmInt8Dot cpu_int8_dot() {
  return ArmInt8Dot::kNone;
}
#endif  // __aarch64__

}  // namespace

ArmInt8Dot arm_int8_dot() {
  static const ArmInt8Dot cpu = cpu_int8_dot();
  return std::min(cpu, g_cap);
}

std::vector<ArmInt8Dot> available_arm_int8_dots() {
  const ArmInt8Dot saved = g_cap;
  g_cap = ArmInt8Dot::kSmmla;
  std::vector<ArmInt8Dot> out;
  for (ArmInt8Dot d : {ArmInt8Dot::kNone, ArmInt8Dot::kSdot, ArmInt8Dot::kSmmla})
    if (d <= arm_int8_dot()) out.push_back(d);
  g_cap = saved;
  return out;
}

std::string arm_int8_dot_name(ArmInt8Dot dot) {
  switch (dot) {
    case ArmInt8Dot::kSdot:
      return "SDOT";
    case ArmInt8Dot::kSmmla:
      return "SMMLA";
    default:
      return "none";
  }
}

void force_arm_int8_dot(ArmInt8Dot dot) {
  g_cap = dot;
}

bool arm_matmul_w8a8_packed(const PackedArgs& a, size_t batch) {
#if defined(__aarch64__)
  const ArmInt8Dot dot = arm_int8_dot();
  if (dot == ArmInt8Dot::kNone) return false;
  // Panels outer, activation rows inner: a panel's bytes stay in L1 while every row uses them.
  const size_t first = a.row_begin / kPanel, end = (a.row_end + kPanel - 1) / kPanel;
  for (size_t panel = first; panel < end; ++panel) {
    if (dot == ArmInt8Dot::kSmmla && batch >= 2)
      smmla_columns(a, panel, batch);
    else
      sdot_columns(a, panel, 0, batch);
  }
  return true;
#else
  (void)a;
  (void)batch;
  return false;
#endif
}

}  // namespace stoa::kernels
