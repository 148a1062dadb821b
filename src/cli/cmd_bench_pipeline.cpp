// `stoa bench pipeline`: K-stage pipelines over TCP, with and without emulated home links
// (app/pipeline/pipeline_bench.h).
#include <memory>

#include "app/pipeline/pipeline_bench.h"
#include "cli/command.h"

namespace stoa::cli {
namespace {

CommandRegistration reg(
    "bench pipeline",
    "Rollouts through K-stage pipelines over TCP, direct and behind emulated home links: "
    "tokens/s, bytes per token, efficiency",
    [](CLI::App& app) {
      auto o = std::make_shared<app::PipelineBenchOptions>();
      app.add_option("--preset", o->preset, "model preset (random weights of its shape)")
          ->capture_default_str();
      app.add_option("--stages", o->stages, "stage counts to run (1: the whole model)")
          ->delimiter(',')
          ->capture_default_str();
      app.add_option("--sequences", o->sequences, "sequences in flight in total")
          ->capture_default_str();
      app.add_option("--micro-batches", o->micro_batches, "decoders at the head (0: 2 K)")
          ->capture_default_str();
      app.add_option("--prompt-tokens", o->prompt_tokens, "prompt length")->capture_default_str();
      app.add_option("--new-tokens", o->new_tokens, "tokens generated per sequence")
          ->capture_default_str();
      app.add_option("--rate-mbit", o->rate_mbit, "link rate each way, per hop")
          ->capture_default_str();
      app.add_option("--rtt-ms", o->rtt_ms, "round trip per hop")->capture_default_str();
      app.add_option("--threads", o->threads, "engine threads per stage")->capture_default_str();
      app.add_flag("--processes", o->processes,
                   "stages as `stoa stage` processes (each loading only its layers), their peak "
                   "resident sets reported");
      app.add_flag("--relay", o->relay,
                   "every hop through a relay both sides dial out to, each over its own link");
      app.add_flag("--json", o->json_out, "print one JSON document on one line");
      return [o] { return app::run_pipeline_bench(*o); };
    });

}  // namespace
}  // namespace stoa::cli
