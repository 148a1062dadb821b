// `stoa bench engine`: our int8 engine beside llama.cpp on the same Q8_0 GGUF
// (bench/engine_bench.h).
#include <memory>

#include "bench/engine_bench.h"
#include "cli/command.h"

namespace stoa::cli {
namespace {

CommandRegistration reg(
    "bench engine", "Engine speed beside llama.cpp on the same Q8_0 GGUF", [](CLI::App& app) {
      auto opts = std::make_shared<bench::EngineBenchOptions>();
      app.add_option("--preset", opts->presets, "Presets to run")->capture_default_str();
      app.add_option("--threads", opts->threads)->capture_default_str();
      app.add_flag("--json", opts->json_out, "One-line JSON on stdout");
      app.add_flag("--quick", opts->quick, "Short run (128-token prompt, 8 steps, 1 rep)");
      app.add_option("--prompt-tokens", opts->prompt_tokens)->capture_default_str();
      app.add_option("--decode-prompt", opts->decode_prompt,
                     "Prompt of each sequence before the decode figures")
          ->capture_default_str();
      app.add_option("--decode-steps", opts->decode_steps)->capture_default_str();
      app.add_option("--decode-warmup", opts->decode_warmup,
                     "Untimed decode steps before the timed ones (both engines)")
          ->capture_default_str();
      app.add_option("--batch", opts->batches, "Decode batch sizes")->capture_default_str();
      app.add_option("--reps", opts->reps, "Best of this many")->capture_default_str();
      app.add_option("--oracle", opts->oracle, "Path of stoa-llama-oracle");
      app.add_flag("--no-llama", opts->no_llama, "Only our engine");
      app.add_option("--backend", opts->backend,
                     "reference | w8a8 | w8a32 (the CPU engine's int8 products) | vulkan (the "
                     "Vulkan backend)")
          ->capture_default_str();
      app.add_option("--workdir", opts->workdir, "Where the GGUF is written");
      app.add_option("--seed", opts->seed)->capture_default_str();
      return [opts] { return bench::run_engine_bench(*opts); };
    });

}  // namespace
}  // namespace stoa::cli
