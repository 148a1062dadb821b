// `--kernel-target NAME` (`stoa work`): every kernel of the process on one SIMD target instead
// of the CPU's best, so that a fleet on one machine can mix targets (rollouts are bit-identical
// on every target).
#pragma once
#include <cstdint>
#include <cstdio>
#include <string>

#include "kernels/targets.h"

namespace stoa::cli {

// Forces `name` for every kernel of the process (the engine and the sampler) before any engine is
// built: the weight layout (packed or grid) follows the target. False, said on stderr with the
// targets this machine has, when it has none by that name.
inline bool force_kernel_target(const std::string& name) {
  const int64_t target = kernels::find_target(name);
  if (target == 0) {
    std::fprintf(stderr,
                 "--kernel-target %s: this machine has no such kernel target; it has: "
                 "%s\n",
                 name.c_str(), kernels::available_target_names().c_str());
    return false;
  }
  const std::string best = kernels::target_name(kernels::active_target());
  kernels::force_target(target);
  std::printf("Kernel target: %s (forced; this machine's best is %s)\n",
              kernels::target_name(kernels::active_target()).c_str(), best.c_str());
  std::fflush(stdout);
  return true;
}

}  // namespace stoa::cli
