// A worker's micro-batches (docs/design/pipeline.md, "Micro-batches in a run"): the rollouts in
// progress cut into M EpisodeRunners over the same engine. A whole worker has one; a pipeline
// group's head keeps M passes down the chain at once, one per micro-batch, each stepped by a
// thread of its own (micro_batch_threads.h), so every stage computes while the others do.
#pragma once
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include "roles/episode/episode_runner.h"
#include "roles/worker/lease_book.h"
#include "roles/worker/rollout_record.h"
#include "roles/worker/worker.h"

namespace stoa::worker {

// One running sample of a leased group (indexed by its EpisodeRunner id).
struct Sample {
  std::shared_ptr<LeaseWork> work;
  std::unique_ptr<RolloutRecord> record;
  std::chrono::steady_clock::time_point started;
  int64_t started_unix_ms = 0;
};

// A group's prompt a micro-batch's runner holds while the group has samples left to start.
struct HeldPrompt {
  std::shared_ptr<LeaseWork> work;
  int64_t id = -1;
};

// One micro-batch: an EpisodeRunner with its share of the slots, its samples and the prompts it
// holds. A whole worker has one, stepped by the loop's thread; a pipeline group's head has M,
// each stepped by a thread of its own (MicroBatchThreads), so M passes are down the chain at
// once. Only its own thread (or the loop's, at the safe point) touches it.
struct MicroBatch {
  int64_t slots = 0;
  std::unique_ptr<episode::EpisodeRunner> runner;
  std::vector<Sample> samples;
  std::vector<HeldPrompt> prompts;
  std::atomic<int64_t> running{0};  // runner->running(), for the loop's thread to read
};

// How many micro-batches: a pipeline group's head keeps M >= 1 in flight (default: its K
// stages, so every stage can compute while the others do), never more than its slots.
inline size_t micro_batch_count(const WorkerOptions& o) {
  if (o.stages <= 1) return 1;
  const int m = o.micro_batches > 0 ? o.micro_batches : o.stages;
  return static_cast<size_t>(std::clamp(m, 1, std::max(1, o.slots)));
}

}  // namespace stoa::worker
