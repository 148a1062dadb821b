// `stoa bench kernels`: the int8 matmul kernels' speed (bench/kernels_bench.h).
#include <memory>

#include "bench/kernels_bench.h"
#include "cli/command.h"

namespace stoa::cli {
namespace {

CommandRegistration reg(
    "bench kernels", "Int8 matmul kernel throughput beside memory bandwidth", [](CLI::App& app) {
      auto opts = std::make_shared<bench::KernelsBenchOptions>();
      app.add_flag("--json", opts->json, "Print one JSON document");
      app.add_option("--threads", opts->threads, "Thread counts to measure");
      app.add_option("--batch", opts->batches, "Batch sizes to measure");
      app.add_option("--min-seconds", opts->min_seconds, "Measuring time per figure");
      app.add_flag("--all-targets", opts->all_targets,
                   "Measure every SIMD target, not only the best");
      app.add_flag("--quick", opts->quick, "Only the first shape (smoke test)");
      app.add_flag("--hot", opts->hot, "Reuse one weight copy (cache-resident): compute ceiling");
      return [opts] { return bench::run_kernels_bench(*opts); };
    });

}  // namespace
}  // namespace stoa::cli
