// `stoa bench train`: tokens/s and MFU of full training steps (bench/train_bench_report.h). Needs
// the trainer.
#include <memory>

#include "bench/train_bench_report.h"
#include "cli/command.h"

namespace stoa::cli {
namespace {

const CommandRegistration registration(
    "bench train", "Trainer step speed (tokens/s) and MFU per architecture and size",
    [](CLI::App& app) {
      auto o = std::make_shared<bench::TrainBenchReportOptions>();
      app.add_option("--archs", o->bench.archs, "Architectures")->delimiter(',');
      app.add_option("--sizes", o->bench.sizes, "Model sizes: 10m, 100m")->delimiter(',');
      app.add_option("--seq-len", o->bench.seq_len, "Tokens per rollout")->capture_default_str();
      app.add_option("--batch", o->bench.batch, "Rollouts per step")->capture_default_str();
      app.add_option("--prompt-tokens", o->bench.prompt_tokens, "Untrained prefix per rollout")
          ->capture_default_str();
      app.add_option("--steps", o->bench.steps, "Timed steps")->capture_default_str();
      app.add_option("--warmup", o->bench.warmup, "Untimed steps first")->capture_default_str();
      app.add_option("--threads", o->bench.threads, "libtorch intra-op threads (0: default)");
      app.add_option("--device", o->bench.device, "cpu, cuda or cuda:N")->capture_default_str();
      app.add_option("--dtype", o->dtype, "Matmul dtype: f32 or bf16")->capture_default_str();
      app.add_option("--nproc", o->bench.nproc,
                     "Also run data parallel on N Gloo ranks (threads of this process, each "
                     "--threads intra-op threads) and report scaling_efficiency")
          ->capture_default_str();
      app.add_flag("--json", o->json, "Print the report as JSON");
      return [o] { return bench::run_train_bench_report(*o); };
    });

}  // namespace
}  // namespace stoa::cli
