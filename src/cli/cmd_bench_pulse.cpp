// `stoa bench pulse`: PULSE on real training steps (bench/pulse_train_bench.h). Needs the trainer.
#include <memory>

#include "bench/pulse_train_bench.h"
#include "cli/command.h"

namespace stoa::cli {
namespace {

const CommandRegistration registration(
    "bench pulse",
    "PULSE int8 patches on real AdamW updates: sizes beside the alternatives, speed, exactness",
    [](CLI::App& app) {
      auto o = std::make_shared<bench::PulseTrainBenchOptions>();
      app.add_option("--arch", o->arch, "qwen3, lfm2 or lfm2_moe")->capture_default_str();
      app.add_option("--size", o->size, "Model size: 10m or 100m")->capture_default_str();
      app.add_option("--lrs", o->lrs, "Learning rates")->delimiter(',');
      app.add_option("--steps", o->steps, "Measure after these step counts")->delimiter(',');
      app.add_option("--seq-len", o->seq_len, "Tokens per rollout")->capture_default_str();
      app.add_option("--batch", o->batch, "Rollouts per step")->capture_default_str();
      app.add_option("--prompt-tokens", o->prompt_tokens, "Untrained prefix per rollout")
          ->capture_default_str();
      app.add_option("--weight-decay", o->weight_decay, "AdamW decoupled weight decay")
          ->capture_default_str();
      app.add_option("--threads", o->threads, "libtorch intra-op threads (0: default)");
      app.add_option("--device", o->device, "cpu, cuda or cuda:N")->capture_default_str();
      app.add_option("--seed", o->seed, "Weight init and data seed")->capture_default_str();
      app.add_option("--coding", o->coding, "Position coding: varint, fixed, shuffled, rowcol")
          ->capture_default_str();
      app.add_flag("--codings", o->codings, "Also report the patch size under every coding");
      app.add_flag("--json", o->json, "Print {\"runs\": [...]} as JSON");
      return [o] { return bench::run_pulse_train_bench(*o); };
    });

}  // namespace
}  // namespace stoa::cli
