// `stoa experiment ablations`: one RL phase per variant from the demo's SFT model
// (app/experiments/ablations.h).
#include <memory>

#include "app/experiments/ablations.h"
#include "cli/command.h"

namespace stoa::cli {
namespace {

CommandRegistration reg(
    "experiment ablations",
    "RL from the demo's SFT model once per variant (loss, staleness bound, PULSE vs full sync), "
    "same seeds and budget; a table of pass@1, stability and cost",
    [](CLI::App& app) {
      auto o = std::make_shared<app::AblationsOptions>();
      o->setup.dir = "stoa-demo";
      o->rl.minutes = 5;
      app.add_option("--dir", o->setup.dir, "the demo directory (its stages are reused)")
          ->capture_default_str();
      app.add_option("--minutes", o->rl.minutes, "RL minutes per variant")->capture_default_str();
      app.add_option("--workers", o->rl.workers)->capture_default_str();
      app.add_option("--only", o->only,
                     "run only these variants (dppo-binary-tv, dppo-binary-kl, ppo-clip, "
                     "truncated-is, staleness-0, staleness-4, full-sync, int8-vs-f32)");
      app.add_option("--mismatch-episodes", o->mismatch_episodes,
                     "episodes per precision for int8-vs-f32")
          ->capture_default_str();
      app.add_option("--eval-limit", o->eval_limit, "validation questions (0: all)")
          ->capture_default_str();
      app.add_option("--sft-examples", o->setup.sft_examples)->capture_default_str();
      app.add_option("--sft-epochs", o->setup.sft_epochs)->capture_default_str();
      app.add_flag("--full", o->full_setup,
                   "the warm start of `stoa demo --full` (reuses that demo directory's SFT)");
      app.add_option("--lr", o->rl.lr, "RL learning rate")->capture_default_str();
      app.add_option("--json", o->json_out, "also write the results JSON here");
      return [o] { return app::run_ablations(*o); };
    });

}  // namespace
}  // namespace stoa::cli
