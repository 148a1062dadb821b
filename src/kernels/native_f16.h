// Whether the Highway target being compiled converts f16 exactly in vector code. For the
// kernels' per-target code: the macro is expanded where it is used, so it names the target of
// that foreach_target pass. Highway 1.0's f16 conversions are exact only where the hardware
// converts (F16C on AVX2/AVX-512, fcvt on AArch64); its emulation elsewhere mishandles Inf/NaN,
// so those targets use the exact scalar conversion (kernels/half.h).
#pragma once

#define STOA_HWY_NATIVE_F16                                                         \
  (HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL || \
   (HWY_TARGET == HWY_NEON && HWY_ARCH_ARM_A64))
