// `stoa demo --worker-kernel-targets`: the SIMD kernel target each demo worker is forced onto
// (`stoa work --kernel-target`). Logits and the sampler are bit-identical on every target, so the
// hub's replay (on its own, best target) must pass every honest rollout whatever target made it;
// a demo that mixes targets with every rollout replayed shows it (docs/design/verification.md).
#pragma once
#include <string>
#include <vector>

namespace stoa::app {

// The names of the kernel targets this build and CPU have, best first (kernels::target_name).
std::vector<std::string> available_kernel_targets();

// The targets a `--worker-kernel-targets` value names: "" → none (every worker on its CPU's
// best), "all" → every one of `available`, else a comma list, each matched against `available`
// in any case and returned as `available` spells it. Throws kInvalidArgument for a name that is
// not available, naming the ones that are.
std::vector<std::string> parse_kernel_targets(const std::string& list,
                                              const std::vector<std::string>& available);

// Worker i (0-based) of `workers` gets targets[i % targets.size()]; empty when `targets` is.
std::vector<std::string> assign_kernel_targets(const std::vector<std::string>& targets,
                                               int workers);

// `stoa demo --worker-backend`: a comma list of `stoa work --backend` values (auto, cpu,
// vulkan), assigned round-robin as the targets are; "" → none. kInvalidArgument for another
// value.
std::vector<std::string> assign_worker_backends(const std::string& list, int workers);

}  // namespace stoa::app
