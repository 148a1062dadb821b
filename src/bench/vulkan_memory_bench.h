// `stoa bench vulkan-memory`: issue 54 item 3's figure. Builds int8 weights of a preset's shape
// in memory (random values on the int8 grid, as `stoa bench scale`'s model is random: the
// figure depends on the shapes, not the values), hands them to the Vulkan backend and runs one
// pass, then reports this process's peak resident set (VmHWM) against the bound the seed's
// Macs can afford: 1.15 x the int8 bytes + 512 MiB. On lavapipe (and any unified-memory
// device) device allocations are host memory, so the peak covers host and device together; the
// backend's own device allocations and the host pages it imports are reported beside it.
#pragma once
#include <string>

namespace stoa::bench {

struct VulkanMemoryBenchOptions {
  std::string preset = "lfm2-8b-a1b";
  int layers = 0;                    // > 0: only the preset's first layers (a cut)
  std::string placement = "shared";  // "shared" (where unified) or "mirror" (a discrete GPU's)
  int tokens = 4;                    // the pass's prompt tokens
  bool json = false;
};

// Prints the report (JSON with the json option); returns the exit status (kUnsupported's when
// no Vulkan device or backend is there).
int run_vulkan_memory_bench(const VulkanMemoryBenchOptions& options);

}  // namespace stoa::bench
