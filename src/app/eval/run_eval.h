// `stoa eval` inside a run: the evaluator of [eval] (roles/run/run_config.h RunEvalConfig) that
// `stoa run` and `stoa train` hand to the trainer loop (roles/trainer/held_out_eval.h). It runs
// evaluate_engine() — the same episodes, codec rule and pass@k as `stoa eval --int8` — on the
// published int8 view, with the run's task and options and the [sampling] turn budgets, and
// appends each summary (with its step and version) to <run dir>/eval.jsonl.
#pragma once
#include "app/eval/eval.h"
#include "roles/run/run_config.h"
#include "roles/trainer/held_out_eval.h"

namespace stoa::app {

// What `stoa eval` would be given for the run's [eval].
EvalOptions run_eval_options(const run::RunConfig& config);

// The trainer loop's held-out evaluation of the run; every_steps 0 (no evaluation) when [eval]
// sets none.
trainer::HeldOutEval held_out_eval(const run::RunConfig& config);

}  // namespace stoa::app
