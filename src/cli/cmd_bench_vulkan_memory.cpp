// `stoa bench vulkan-memory`: the Vulkan backend's peak memory at a preset's shape
// (bench/vulkan_memory_bench.h; issue 54 item 3).
#include <memory>

#include "bench/vulkan_memory_bench.h"
#include "cli/command.h"

namespace stoa::cli {
namespace {

CommandRegistration bench_cmd(
    "bench vulkan-memory",
    "Random int8 weights of a preset's shape on the Vulkan backend, one pass: peak RSS against "
    "1.15 x the int8 bytes + 512 MiB, device allocations beside it",
    [](CLI::App& app) {
      auto opts = std::make_shared<bench::VulkanMemoryBenchOptions>();
      app.add_option("--preset", opts->preset, "model preset")->capture_default_str();
      app.add_option("--layers", opts->layers, "only the preset's first N layers (a cut)");
      app.add_option("--placement", opts->placement,
                     "shared: the host's weight pages imported where the device is unified; "
                     "mirror: a device copy (a discrete GPU's way)")
          ->capture_default_str();
      app.add_option("--tokens", opts->tokens, "prompt tokens of the one pass")
          ->capture_default_str();
      app.add_flag("--json", opts->json, "print JSON");
      return [opts] { return bench::run_vulkan_memory_bench(*opts); };
    });

}  // namespace
}  // namespace stoa::cli
