#include "kernels/target_loop.h"

#include <hwy/targets.h>

#include <algorithm>

#include "kernels/matmul_int8_arm.h"
#include "kernels/targets.h"

namespace stoa::kernels::test {

void for_each_target(const std::function<void()>& body) {
  const auto targets = available_targets();
  // x86 builds always add the EMU128 fallback; on 64-bit ARM, Highway 1.0.3 compiles NEON only
  // (it is the baseline there, so no fallback is generated).
  const bool has_simd = std::any_of(targets.begin(), targets.end(),
                                    [](int64_t t) { return t != HWY_EMU128 && t != HWY_SCALAR; });
  ASSERT_TRUE(has_simd) << "expected at least one SIMD target besides the fallback";
  for (int64_t target : targets) {
    force_target(target);
    ASSERT_EQ(active_target(), target) << target_name(target);
    // On NEON the packed kernel has one variant per int8 dot-product instruction set the CPU
    // has (plain C++, SDOT, SMMLA): each is a target of its own here.
    const auto dots =
        target == HWY_NEON ? available_arm_int8_dots() : std::vector<ArmInt8Dot>{ArmInt8Dot::kNone};
    for (ArmInt8Dot dot : dots) {
      force_arm_int8_dot(dot);
      SCOPED_TRACE("target " + target_name(target) +
                   (target == HWY_NEON ? " int8 dot " + arm_int8_dot_name(dot) : ""));
      body();
    }
    force_arm_int8_dot(ArmInt8Dot::kSmmla);
  }
  force_target(0);
}

}  // namespace stoa::kernels::test
