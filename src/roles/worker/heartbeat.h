// The worker's heartbeat loop: every heartbeat_interval_s / 2 it lists the leases in progress
// (renewing them), reports the engine's version, tokens/s and idle fraction, and marks the leases
// the hub cancelled so the rollout loop drops their rollouts.
#pragma once
#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>

#include "net/hub_client.h"
#include "roles/worker/hub_contact.h"
#include "roles/worker/lease_book.h"

namespace stoa::worker {

// Why the worker cannot go on (quarantined by the hub, weights for another model): set by any
// thread; the rollout loop stops the worker with it (the first reason set wins).
class FatalReason {
 public:
  void set(const std::string& why) const {
    std::lock_guard lock(mutex_);
    if (why_.empty()) why_ = why;
  }
  std::optional<std::string> get() const {
    std::lock_guard lock(mutex_);
    if (why_.empty()) return std::nullopt;
    return why_;
  }

 private:
  mutable std::mutex mutex_;
  mutable std::string why_;
};

// What the rollout loop publishes for the heartbeat and the progress report (written by the
// loop, read by their threads).
struct WorkerGauges {
  std::atomic<uint64_t> tokens_generated{0};  // counted as each token is sampled
  std::atomic<uint64_t> engine_version{0};
  std::atomic<bool> have_engine{false};
  std::atomic<double> idle_fraction{0};
  std::atomic<int64_t> rollouts_running{0};
  // The blob download in progress, if any (set once before the threads start).
  std::function<std::optional<net::BlobDownload>()> download;
  // The blob the weight sync is fetching (its kind and versions), if any (set once likewise):
  // tells the volunteer whether a download is the model or an update patch of version N.
  std::function<std::optional<net::BlobRef>()> fetching;
  // What the worker serves to other workers, when it is in the swarm (set once likewise).
  std::function<std::optional<net::SwarmServing>()> swarm;
  // Called on the generation thread when the engine took new weights (set before the start).
  std::function<void(uint64_t version, bool anchor, double apply_ms)> on_weights;
  FatalReason fatal;
  // Whether the hub answers (hub_contact.h): every thread that calls it reports here.
  HubContact hub;
  // The hub said the run is over (a lease or heartbeat answer): the rollout loop stops.
  std::atomic<bool> run_ended{false};
};

// Beats until a stop is requested (a thread of WorkerThreads). Reports each beat to gauges.hub;
// sets gauges.run_ended when the hub says the run is over, and gauges.fatal when it refuses the
// worker for good (quarantined, or its join token revoked so the session cannot be resumed).
void run_heartbeat(net::HubClient& hub, const std::string& worker_id, int heartbeat_interval_s,
                   LeaseBook& book, WorkerGauges& gauges, std::stop_token stop);

}  // namespace stoa::worker
