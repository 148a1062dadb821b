// `stoa bench train`: tokens/s and MFU of full DPPO training steps (forward, backward, AdamW)
// for ~10M and ~100M models of each architecture, against the matmul peak measured in the same
// run. A few minutes on a 2-core CPU with the defaults.
#include "bench/train_bench_report.h"

#include <cstdio>
#include <memory>

#include "core/error.h"
#include "train/train_bench.h"

namespace stoa::bench {
int run_train_bench_report(TrainBenchReportOptions o) {
  STOA_CHECK(parse_dtype(o.dtype, &o.bench.compute_dtype), ErrorKind::kInvalidArgument,
             "unknown dtype '", o.dtype, "' (f32, bf16)");
  train::TrainBenchReport report = train::run_train_bench(o.bench);
  if (o.json) {
    std::printf("%s\n", train::train_bench_json(report).c_str());
    return 0;
  }
  std::printf("matmul peak: %.1f GFLOP/s (%s, %s, %d threads)\n", report.sgemm_gflops,
              report.device.c_str(), report.compute_dtype.c_str(), report.threads);
  std::printf("%-9s %-5s %12s %8s %12s %10s %7s\n", "arch", "size", "params", "step s", "tokens/s",
              "GFLOP/s", "MFU");
  for (const auto& r : report.results) {
    std::printf("%-9s %-5s %12lld %8.2f %12.1f %10.1f %6.1f%%\n", r.arch.c_str(), r.size.c_str(),
                static_cast<long long>(r.params), r.step_seconds, r.tokens_per_second,
                r.model_gflops, 100.0 * r.mfu);
  }
  return 0;
}

}  // namespace stoa::bench
