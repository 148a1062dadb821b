// f16 / bf16 <-> f32 conversions (see vec_ops.h), compiled per SIMD target by Highway's
// foreach_target: f32 -> f16 / bf16 round to nearest even and keep NaN a NaN on every target.
#include <cstring>

#include "kernels/half.h"
#include "kernels/native_f16.h"
#include "kernels/vec_ops.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/convert.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

HWY_BEFORE_NAMESPACE();
namespace stoa::kernels {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

constexpr bool kNativeF16 = STOA_HWY_NATIVE_F16;

using DF = hn::CappedTag<float, 16>;

void F16ToF32(const uint16_t* HWY_RESTRICT in, float* HWY_RESTRICT out, size_t n) {
  const DF df;
  const hn::Rebind<hwy::float16_t, DF> dh;
  const size_t lanes = hn::Lanes(df);
  size_t i = 0;
  for (; kNativeF16 && i + lanes <= n; i += lanes)
    hn::StoreU(hn::PromoteTo(df, hn::LoadU(dh, reinterpret_cast<const hwy::float16_t*>(in + i))),
               df, out + i);
  for (; i < n; ++i) out[i] = f16_bits_to_f32(in[i]);
}

void F32ToF16(const float* HWY_RESTRICT in, uint16_t* HWY_RESTRICT out, size_t n) {
  const DF df;
  const hn::Rebind<hwy::float16_t, DF> dh;
  const size_t lanes = hn::Lanes(df);
  size_t i = 0;
  for (; kNativeF16 && i + lanes <= n; i += lanes)
    hn::StoreU(hn::DemoteTo(dh, hn::LoadU(df, in + i)), dh,
               reinterpret_cast<hwy::float16_t*>(out + i));
  for (; i < n; ++i) out[i] = f32_to_f16_bits(in[i]);
}

void Bf16ToF32(const uint16_t* HWY_RESTRICT in, float* HWY_RESTRICT out, size_t n) {
  const DF df;
  const hn::RebindToUnsigned<DF> du32;
  const hn::Rebind<uint16_t, DF> du16;
  const size_t lanes = hn::Lanes(df);
  size_t i = 0;
  for (; i + lanes <= n; i += lanes) {
    const auto w = hn::ShiftLeft<16>(hn::PromoteTo(du32, hn::LoadU(du16, in + i)));
    hn::StoreU(hn::BitCast(df, w), df, out + i);
  }
  for (; i < n; ++i) out[i] = bf16_bits_to_f32(in[i]);
}

// Round to nearest even on the bit pattern (Highway 1.0's DemoteTo(bf16) truncates).
void F32ToBf16(const float* HWY_RESTRICT in, uint16_t* HWY_RESTRICT out, size_t n) {
  const DF df;
  const hn::RebindToSigned<DF> di32;
  const hn::RebindToUnsigned<DF> du32;
  const hn::Rebind<uint16_t, DF> du16;
  const size_t lanes = hn::Lanes(df);
  const auto bias = hn::Set(du32, 0x7fffu);
  const auto one = hn::Set(du32, 1u);
  const auto quiet = hn::Set(du32, 0x40u);
  size_t i = 0;
  for (; i + lanes <= n; i += lanes) {
    const auto v = hn::LoadU(df, in + i);
    const auto u = hn::BitCast(du32, v);
    const auto rounded =
        hn::ShiftRight<16>(hn::Add(u, hn::Add(bias, hn::And(hn::ShiftRight<16>(u), one))));
    const auto nan = hn::Or(hn::ShiftRight<16>(u), quiet);
    const auto is_nan = hn::RebindMask(du32, hn::IsNaN(v));
    const auto r = hn::IfThenElse(is_nan, nan, rounded);
    hn::StoreU(hn::DemoteTo(du16, hn::BitCast(di32, r)), du16, out + i);
  }
  for (; i < n; ++i) out[i] = f32_to_bf16_bits(in[i]);
}

}  // namespace HWY_NAMESPACE
}  // namespace stoa::kernels
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace stoa::kernels {

HWY_EXPORT(F16ToF32);
HWY_EXPORT(F32ToF16);
HWY_EXPORT(Bf16ToF32);
HWY_EXPORT(F32ToBf16);

void convert_f16_to_f32(const uint16_t* in, float* out, size_t n) {
  HWY_DYNAMIC_DISPATCH(F16ToF32)(in, out, n);
}
void convert_f32_to_f16(const float* in, uint16_t* out, size_t n) {
  HWY_DYNAMIC_DISPATCH(F32ToF16)(in, out, n);
}
void convert_bf16_to_f32(const uint16_t* in, float* out, size_t n) {
  HWY_DYNAMIC_DISPATCH(Bf16ToF32)(in, out, n);
}
void convert_f32_to_bf16(const float* in, uint16_t* out, size_t n) {
  HWY_DYNAMIC_DISPATCH(F32ToBf16)(in, out, n);
}

}  // namespace stoa::kernels
#endif  // HWY_ONCE
