// `stoa bench train`: tokens/s and MFU of full training steps (bench/train_bench_report.h). Needs
// the trainer.
#include <memory>

#include "bench/train_bench_report.h"
#include "bench/train_plan.h"
#include "cli/command.h"

namespace stoa::cli {
namespace {

const CommandRegistration registration(
    "bench train", "Trainer step speed (tokens/s) and MFU per architecture and size",
    [](CLI::App& app) {
      auto o = std::make_shared<bench::TrainBenchReportOptions>();
      auto plan = std::make_shared<bench::TrainPlanOptions>();
      auto plan_mode = std::make_shared<bool>(false);
      app.add_flag("--plan", *plan_mode,
                   "Print the per-rank memory plan instead (--preset, --ranks, --gpu-gb, "
                   "--sharding, --sequences, --plan-seq-len, --micro-batch-tokens; --measure "
                   "checks it against the CPU trainer)");
      app.add_option("--preset", plan->preset,
                     "Plan: model preset, or a bench size (qwen3-10m, lfm2_moe-100m, ...)")
          ->capture_default_str();
      app.add_option("--ranks", plan->ranks, "Plan: rank counts")->delimiter(',');
      app.add_option("--gpu-gb", plan->gpu_gb, "Plan: GB per GPU")->capture_default_str();
      app.add_option("--sharding", plan->sharding, "Plan: fsdp or zero1")->capture_default_str();
      app.add_option("--sequences", plan->sequences, "Plan: sequences per step")
          ->capture_default_str();
      app.add_option("--plan-seq-len", plan->seq_len, "Plan: tokens per sequence")
          ->capture_default_str();
      app.add_option("--micro-batch-tokens", plan->micro_batch_tokens, "Plan: tokens per chunk")
          ->capture_default_str();
      auto lora = std::make_shared<bool>(false);
      auto lora_rank = std::make_shared<int64_t>(16);
      app.add_flag("--lora", *lora,
                   "Plan: LoRA adapters on a frozen base (no base gradients or "
                   "moments) instead of full fine-tuning");
      app.add_option("--lora-rank", *lora_rank, "Plan: LoRA rank")->capture_default_str();
      app.add_option("--lora-targets", plan->lora_targets,
                     "Plan: LoRA target modules (all-linear, or names such as q_proj,w1)")
          ->delimiter(',');
      app.add_option("--lora-base-dtype", plan->lora_base_dtype, "Plan: the frozen base's dtype")
          ->capture_default_str();
      app.add_flag("--measure", plan->measure,
                   "Plan: run `stoa train --sft` at each rank count here and compare");
      app.add_option("--dir", plan->dir, "Plan --measure: working directory")
          ->capture_default_str();
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
      CLI::Option* dtype = app.get_option("--dtype");
      return [o, plan, plan_mode, dtype, lora, lora_rank] {
        if (*plan_mode) {
          plan->lora_rank = *lora ? *lora_rank : 0;
          plan->json = o->json;
          if (dtype->count() > 0) plan->dtype = o->dtype;  // else the plan's bf16
          plan->threads = o->bench.threads > 0 ? o->bench.threads : plan->threads;
          return bench::run_train_plan(*plan);
        }
        return bench::run_train_bench_report(*o);
      };
    });

}  // namespace
}  // namespace stoa::cli
