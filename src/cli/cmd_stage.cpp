// `stoa stage`: one pipeline stage as a process (roles/pipeline/stage_main.h).
#include <memory>

#include "cli/command.h"
#include "roles/pipeline/stage_main.h"

namespace stoa::cli {
namespace {

CommandRegistration reg(
    "stage",
    "Serve one stage of a pipeline: a span of a model's layers behind a TCP port "
    "(docs/design/pipeline.md)",
    [](CLI::App& app) {
      auto o = std::make_shared<pipeline::StageMainOptions>();
      app.add_option("--model", o->model_dir, "Hugging Face model directory");
      app.add_option("--preset", o->preset, "a preset's seeded random weights (benches)");
      app.add_option("--seed", o->seed, "seed of the preset's weights")->capture_default_str();
      app.add_option("--stages", o->stages, "stages in the pipeline")->capture_default_str();
      app.add_option("--index", o->index, "this stage's place (1 .. stages - 1; 0 is the head)")
          ->capture_default_str();
      app.add_option("--listen", o->listen, "host:port to serve on (port 0: any free one)")
          ->capture_default_str();
      app.add_option("--next", o->next, "host:port of the next stage (none on the last)");
      app.add_option("--relay", o->relay,
                     "behind NAT: host:port of a relay to serve through instead of listening");
      app.add_option("--key", o->key, "the key this stage serves under at the relay");
      app.add_option("--next-key", o->next_key, "--next is a relay; the next stage's key there");
      app.add_option("--threads", o->threads, "engine threads")->capture_default_str();
      return [o] { return pipeline::run_stage(*o); };
    });

}  // namespace
}  // namespace stoa::cli
