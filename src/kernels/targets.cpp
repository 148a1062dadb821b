#include "kernels/targets.h"

#include <hwy/targets.h>

namespace stoa::kernels {

int64_t matmul_dispatch_target();  // matmul_int8.cpp: HWY_TARGET of the dispatched code

std::vector<int64_t> available_targets() {
  return hwy::SupportedAndGeneratedTargets();
}

std::string target_name(int64_t target) {
  return hwy::TargetName(target);
}

int64_t active_target() {
  return matmul_dispatch_target();
}

void force_target(int64_t target) {
  hwy::SetSupportedTargetsForTest(target);
}

}  // namespace stoa::kernels
