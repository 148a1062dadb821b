// The trainer loop inside the hub process: take complete groups from the ledger (TrainerPort),
// apply the staleness policy, take one DPPO step, publish the next version (the f32 masters, tensor
// by tensor, into the publisher's one int8 view → PULSE patch, anchors every N), record the step
// in the ledger, checkpoint.
//
// Crash safety ("no rollout is trained on twice"): a step's groups are marked trained in the
// ledger (one durable transaction) BEFORE the checkpoint that contains the step is written. A
// kill -9 between the two loses that step's update (the restarted trainer resumes from the older
// checkpoint and those groups stay closed) — at-most-once, never twice. With checkpoint_every = 1
// the window is one step. Versions are numbered by the ledger and the catalog, not by the
// trainer's step count: a restarted trainer always publishes a fresh version (one above every
// published one) from the weights it actually holds, so no worker keeps generating with a lost
// step's weights for longer than one sync. That version is a patch from the published int8 view,
// which the publisher rebuilds from the blob store (pulse/publisher.h): workers that held a
// version before the restart catch up with patches, not a re-download.
//
// A group the trainer cannot train on never ends the run: before a step every rollout is checked
// against the rule the hub's intake applies (env/rollout_rule.h) and a group that breaks it is
// dropped in the ledger (reason "invalid_rollout"); a batch the trainer still refuses (a
// non-finite loss, a demand of the loss the rule does not know) is dropped whole (reason
// "trainer_refused"). Both are durable before the next step, so a restart never hands them out
// again, and counted (groups_refused(), the hub's groups_total{outcome="dropped",reason}).
//
// Training never waits for a particular worker: a step trains on whatever complete groups exist
// once `gather_timeout` has passed with at least `min_groups` of them.
//
// With `skip_uniform_groups` (DAPO's dynamic sampling), groups whose rollouts all earned the same
// reward do not count towards groups_per_step and are not run through the model — their gradient
// is exactly zero (step_batch.h) — but they are closed in the ledger with the step and their
// rewards count in its reward mean. The trainer's compute then goes to groups that carry signal;
// the workers, idle most of the time when the trainer is the bottleneck, make the extra groups.
#pragma once
#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/jsonl.h"
#include "model/weights.h"
#include "pulse/blob_store.h"
#include "pulse/publisher.h"
#include "roles/hub/observe/learning_signal.h"
#include "roles/hub/trainer_port.h"
#include "roles/trainer/held_out_eval.h"
#include "roles/trainer/step_batch.h"
#include "roles/trainer/step_log.h"
#include "roles/trainer/step_progress.h"
#include "train/trainer.h"

namespace stoa::trainer {

struct TrainerLoopOptions {
  StalenessPolicy staleness;
  size_t groups_per_step = 4;  // at most this many groups per optimiser step
  size_t min_groups = 1;       // train once this many are ready and gather_timeout passed
  // Count and train only groups with a reward spread (see above). Gathering stops anyway once
  // kMaxGatherFactor × groups_per_step groups are in hand, so a policy that earns the same reward
  // everywhere (all 0 at the start) still steps — on everything it has, as without the option.
  bool skip_uniform_groups = false;
  // Consecutive steps without learning signal (every group uniform, or a zero gradient) after
  // which the loop logs a warning, and again every as many steps while it lasts
  // (hub/observe/learning_signal.h; ≤ 0: never). The hub counts the same steps for its reports.
  int64_t no_signal_warn_steps = hub::kDefaultNoSignalWarnSteps;
  std::chrono::milliseconds gather_timeout{2000};
  std::chrono::milliseconds poll{250};  // one take_groups wait
  int64_t checkpoint_every = 1;         // steps (≥ 1)
  std::string checkpoint_dir;           // Trainer::save_checkpoint target ("" disables)
  std::string log_path;                 // step_log.h JSONL, one line per step ("" disables)
  pulse::PublisherOptions publisher;
  int64_t max_steps = 0;  // stop after this many ledger steps (0: until stop)
  // The run's top-K (the hub's `topk`): a rollout reporting another K is refused like any other
  // breach of the rollout rule (env/rollout_rule.h). nullopt: any K.
  std::optional<int32_t> topk;
  // Rank 0 of a data-parallel trainer (train/distributed.h); null: one process.
  std::shared_ptr<train::Communicator> ranks;
  HeldOutEval eval;  // [eval]: none by default (held_out_eval.h)
};

struct LoopStep {
  int64_t step = 0;      // the ledger's step number
  uint64_t version = 0;  // published after the step
  train::StepMetrics metrics;
  hub::StepReport report;
  std::vector<std::string> trained;  // group ids
  std::vector<std::string> dropped;
  std::map<uint64_t, int64_t> staleness_histogram;
  size_t uniform_groups = 0;  // closed with the step without a pass through the model
  uint64_t patch_bytes = 0, anchor_bytes = 0;
};

class TrainerLoop {
 public:
  // Resumes from options.checkpoint_dir when it holds a checkpoint, else starts from `initial`.
  // With LoRA (train_options.lora) the checkpoint holds adapters only: they resume on `initial`,
  // the run's base model, and every version published is the merged W + scale·B·A.
  TrainerLoop(hub::TrainerPort& port, pulse::BlobStore& store, const ModelWeights& initial,
              const train::TrainOptions& train_options, TrainerLoopOptions options);
  ~TrainerLoop();

  // Publishes the weights this process holds as a new version (one above every version the ledger
  // or the catalog holds, or 0 on a fresh run).
  // Call once before stepping; step_once calls it if not done.
  void start();
  // Gathers groups (up to gather_timeout), drops stale ones, trains, publishes, checkpoints.
  // Returns the step, or nullopt when nothing was trained (nothing ready, or all dropped).
  std::optional<LoopStep> step_once();
  // step_once until `stop` is set or max_steps is reached.
  void run(const std::atomic<bool>& stop);

  bool resumed() const { return resumed_; }
  uint64_t version() const { return version_; }
  int64_t last_step() const { return last_step_; }
  int64_t groups_dropped() const { return groups_dropped_; }
  int64_t groups_refused() const { return groups_refused_; }
  const train::Trainer& trainer() const { return *trainer_; }
  const hub::LearningSignalWatch& learning_signal() const { return signal_; }

 private:
  uint64_t publish();             // returns the new version
  size_t counted_groups() const;  // carry_ groups that count towards groups_per_step
  // Drops (in the ledger, logged, counted) the groups holding a rollout the rule refuses.
  void drop_invalid(std::vector<hub::AcceptedGroup>* groups);
  void drop_refused(std::vector<std::string> group_ids, const std::string& reason,
                    const std::string& why);
  void log_step(const LoopStep& s);
  void watch_signal(const hub::StepReport& report);
  // Runs options_.eval on the published view when one is due after `step`.
  void evaluate_held_out(int64_t step);

  hub::TrainerPort& port_;
  pulse::BlobStore& store_;
  TrainerLoopOptions options_;
  std::unique_ptr<train::Trainer> trainer_;
  Hash128 config_hash_;  // of the trainer's model config: part of every blob's fingerprint
  std::unique_ptr<pulse::Publisher> publisher_;
  std::vector<hub::AcceptedGroup> carry_;  // taken from the port, not yet trained or dropped
  bool resumed_ = false;
  bool started_ = false;
  uint64_t version_ = 0;
  int64_t last_step_ = 0;
  int64_t groups_dropped_ = 0;
  int64_t groups_refused_ = 0;  // invalid_rollout + trainer_refused
  uint64_t last_patch_bytes_ = 0, last_anchor_bytes_ = 0;
  std::chrono::steady_clock::time_point last_step_end_;
  JsonlWriter log_;  // the step log (step_log.h)
  hub::LearningSignalWatch signal_;
  std::optional<StepProgress> progress_;  // "step N of M, about T left" (from start())
  // The last held-out evaluation's numbers, reported with every later step (held_out_eval.h).
  std::map<std::string, double> held_out_;
};

}  // namespace stoa::trainer
