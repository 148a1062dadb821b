// The worker's generation loop (the caller's thread): between two decode steps (the only safe
// point) it takes the newest verified weights, drops cancelled groups' rollouts and fills free
// slots — samples of the groups it holds first, then a new lease — and then advances every
// rollout by one step of the EpisodeRunner (one batched forward pass). A group's prompt is
// prefilled once and forked for its G samples. Every sampled token goes into the rollout's
// RolloutRecord with the version of the weights of its step; finished rollouts go to the
// streamer.
#pragma once
#include <atomic>
#include <cstdint>

#include "core/thread_pool.h"
#include "env/task.h"
#include "env/token_codec.h"
#include "model/config.h"
#include "net/hub_client.h"
#include "roles/worker/heartbeat.h"
#include "roles/worker/lease_book.h"
#include "roles/worker/rollout_streamer.h"
#include "roles/worker/weight_sync.h"
#include "roles/worker/worker.h"

namespace stoa::worker {

// What the loop runs with (all must outlive run_rollout_loop).
struct RolloutContext {
  const WorkerOptions& options;
  const ModelConfig& config;
  const env::Task& task;
  const env::TokenCodec& codec;
  int64_t sample_vocab = 0;  // sampling sees ids below this only (what the codec can decode)
  const net::JoinResponse& joined;
  ThreadPool* pool = nullptr;
};

// Runs until `stop` or options.max_minutes, then finishes the rollouts in progress for up to
// options.shutdown_grace_s. Counts rollouts_finished, weight_switches and leases into `stats`.
void run_rollout_loop(const RolloutContext& context, WeightSync& sync, net::HubClient& hub,
                      LeaseBook& book, RolloutStreamer& streamer, WorkerGauges& gauges,
                      const std::atomic<bool>& stop, WorkerStats& stats);

}  // namespace stoa::worker
