// A held-out evaluation during a run ([eval] in the run config): every `every_steps` steps the
// trainer loop hands the version it just published — the int8 view every worker generates with —
// to an evaluator, logs the result, and reports it to the hub with every later step
// (StepReport::extra as eval_*: /v1/status's last_step, /metrics as stoa_train_eval_*,
// `stoa status`). The evaluator is `stoa eval`'s own (app/eval/run_eval.h), handed down by the
// command that starts the run: the trainer role does not see the application layer.
//
// The names are the task's, not a benchmark's: `mean_reward` is the task's reward averaged over
// every sample, `pass@k` counts a sample as a success at reward >= the run's success_reward.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <string>

#include "pulse/int8_state.h"

namespace stoa::trainer {

struct HeldOutResult {
  std::string split;  // the question file evaluated
  int64_t questions = 0;
  int64_t samples_per_question = 0;
  double mean_reward = 0;
  std::map<int, double> pass_at;  // k -> pass@k (1 always present)
  double seconds = 0;
};

struct HeldOutEval {
  // 0: no evaluation. Otherwise after every step whose number is a multiple of this, and once on
  // the starting weights of a fresh run (the baseline the later numbers compare with).
  int64_t every_steps = 0;
  // Evaluates `weights`, the published int8 view at `version` after ledger step `step`. Runs on
  // the trainer loop's thread: the trainer does not step meanwhile (workers keep generating).
  // An error is logged and the run goes on: an evaluation must never end the training it watches.
  std::function<HeldOutResult(int64_t step, uint64_t version, const pulse::Int8State& weights)>
      evaluate;
};

// The numbers a result adds to every later StepReport's extra: eval_step, eval_version,
// eval_questions, eval_mean_reward and eval_pass_at_<k> for each k.
std::map<std::string, double> held_out_report(const HeldOutResult& result, int64_t step,
                                              uint64_t version);

// The log line: "held-out eval at step 20 (version 20): mean reward 0.41, pass@1 0.38, pass@4
// 0.55 over 100 questions of val.jsonl (1 sample each, 12.3 s)".
std::string held_out_line(const HeldOutResult& result, int64_t step, uint64_t version);

}  // namespace stoa::trainer
