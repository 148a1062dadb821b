// What the trainer loop (roles/trainer) consumes from the hub, torch-free. The hub's intake
// fills the ledger with accepted rollouts; the trainer loop asks for complete groups it has not
// trained on, trains, and marks them trained at step S in the same ledger, so a hub restarted
// after a crash never hands out (and never trains on) a rollout twice. Publishing a version
// records it and wakes every worker long-polling GET /v1/version.
#pragma once
#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "pulse/publisher.h"

namespace stoa::hub {

// One accepted rollout as the trainer needs it (the hub's copy: reward recomputed here).
struct AcceptedRollout {
  std::string id;  // the client's UUID
  std::string worker_id;
  std::vector<int32_t> tokens;
  std::vector<uint8_t> mask;       // 1: model-generated
  std::vector<float> logprobs;     // behaviour log μ
  std::vector<uint64_t> versions;  // per-token policy version
  int32_t topk = 0;
  std::vector<int32_t> topk_ids;
  std::vector<float> topk_logprobs;
  double reward = 0;
  // min / max of versions[t] over model-generated tokens (the staleness policy reads min).
  uint64_t min_version = 0;
  uint64_t max_version = 0;
};

struct AcceptedGroup {
  std::string group_id;
  std::string prompt_id;
  std::vector<AcceptedRollout> rollouts;  // exactly G
  uint64_t min_version() const;           // over all rollouts
};

// Numbers the trainer loop reports per step; they go to GET /metrics and /v1/status.
struct StepReport {
  int64_t step = 0;
  double step_seconds = 0;
  double busy_fraction = 0;  // of wall time since the last step, the trainer was computing
  double masked_fraction = 0;
  double tv = 0;
  double kl = 0;
  double reward_mean = 0;
  double loss = 0;
  int64_t groups = 0;
  // Of `groups`, those whose rollouts all earned the same reward: advantage 0, no gradient
  // (observe/learning_signal.h), whether or not they ran through the model.
  int64_t groups_uniform = 0;
  int64_t tokens = 0;
  std::map<std::string, double> extra;  // anything else, exported as stoa_train_<key>
};

class TrainerPort {
 public:
  virtual ~TrainerPort() = default;

  // Up to max_groups complete groups (G accepted rollouts each) that are neither trained nor
  // dropped, oldest first. Blocks up to `wait` for at least one; empty on timeout or stop().
  // Groups handed out stay "pending" until marked: calling again does not return them twice
  // in this process, but after a restart unmarked groups come back (nothing is lost).
  virtual std::vector<AcceptedGroup> take_groups(size_t max_groups,
                                                 std::chrono::milliseconds wait) = 0;
  // Records, in one transaction, that these groups were trained on at `step` (with the step's
  // report). Durable when this returns.
  virtual void mark_trained(const std::vector<std::string>& group_ids,
                            const StepReport& report) = 0;
  // The staleness policy dropped these groups; they are counted and never returned again.
  virtual void mark_dropped(const std::vector<std::string>& group_ids,
                            const std::string& reason) = 0;
  // Records a published version (after Publisher::publish wrote the blobs) and wakes
  // long-pollers. `state_hash` is the int8 state's hash at that version.
  virtual void publish_version(const pulse::Published& published, const Hash128& state_hash) = 0;
  // The last step recorded in the ledger (0 if none) and the latest published version: what a
  // restarted trainer resumes from (together with its own checkpoint).
  virtual int64_t last_step() const = 0;
  virtual std::optional<uint64_t> latest_version() const = 0;
  // Counters for the summary: accepted rollouts, groups dropped stale, ...
  virtual std::map<std::string, double> counters() const = 0;
};

}  // namespace stoa::hub
