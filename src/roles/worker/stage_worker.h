// A worker in a pipeline group (docs/design/pipeline.md, "Pipeline groups"): a model bigger than
// any one member held by K workers, each the engine of a contiguous span of layers. Stage 0, the
// head, is a worker like any other — it joins, leases, drives the rollouts and submits them —
// whose engine is a PipelineBackend linked to stage 1 (rollout_loop.cpp). Stages 1 .. K-1 join
// the hub for the run's files and their weights, sync only their span (an EngineStore of the span:
// its tensors verified against the trainer's per-tensor hashes, the others' hashes kept) and serve
// the stage before them (StageServer). They lease nothing: the group's rollouts are the head's.
//
// Weights versions: at a safe point the head names its version (a kWeights frame) and every stage
// takes its verified updates up to it, waiting up to stage_wait_s for its own sync to verify it;
// a stage already past it (an anchor) answers with its own, and the head catches up before its
// next pass. A stage computes a pass only with the version named last (pipeline_stage.h).
#pragma once
#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "core/thread_pool.h"
#include "engine/engine_weights.h"
#include "engine/pipeline_stage.h"
#include "model/config.h"
#include "model/layer_span.h"
#include "net/hub_client.h"
#include "roles/worker/weight_sync.h"
#include "roles/worker/worker.h"
#include "roles/worker/worker_session.h"

namespace stoa::worker {

// This worker's span of a group of options.stages (kInvalidArgument for a bad place or link).
LayerSpan pipeline_span(const ModelConfig& config, const WorkerOptions& options);

// The link from the head to stage 1 (kNetwork when it cannot be reached).
std::unique_ptr<engine::StageLink> link_to_next_stage(const WorkerOptions& options);

// A stage's weights as its verified sync holds them (engine::StageWeights).
class SyncedStageWeights final : public engine::StageWeights {
 public:
  SyncedStageWeights(WeightSync& sync, int wait_s) : sync_(sync), wait_s_(wait_s) {}
  uint64_t bring_to(uint64_t version) override;
  std::shared_lock<std::shared_mutex> pass_lock() override;
  uint64_t version() const override { return sync_.engine_version(); }

 private:
  WeightSync& sync_;
  int wait_s_;
};

// A stage after the head, until `stop`: joins, syncs its span, serves. Throws as run_worker
// does for a refused join or an unreachable hub.
WorkerStats run_stage_worker(const WorkerOptions& options, const std::atomic<bool>& stop);
// The same once joined: syncs the span of options.stage and serves it until `stop`.
WorkerStats serve_stage(const WorkerOptions& options, WorkerSession& session,
                        const ModelConfig& config, const std::atomic<bool>& stop);

// ---- places the hub gives (roles/hub/groups/pipeline_groups.h) ----

// How a member's group has gone, for the hub (net::PipelineGroupReport): the head counts its
// pipeline's breaks and the stage the last one named, a later stage how often the stage after it
// failed it. A group that keeps breaking is dissolved and the member at fault kept out a while.
struct GroupHealth {
  explicit GroupHealth(uint64_t group) : group_id(group) {}
  const uint64_t group_id;
  std::atomic<int64_t> breaks{0};
  std::atomic<int> fault_stage{-1};
  std::atomic<int64_t> next_failures{0};
  net::PipelineGroupReport report() const {
    return {group_id, breaks.load(), fault_stage.load(), next_failures.load()};
  }
};
// The stage of a group of `stages` that a break's reason names (a stage's error frame begins
// "stage layers [a, b) of L: "), or -1 when it names none (a stall, a dead link).
int stage_named_in(const std::string& reason, const ModelConfig& config, int stages);

// The least memory a stage of `config` can need (a group of as many stages as the hub forms at
// most, or one a layer): a worker below it cannot take part at all.
uint64_t smallest_stage_need(const ModelConfig& config);
// The port this worker serves a stage on: --stage-listen's, or a free one.
int stage_port(const WorkerOptions& options);
// What a member tells the hub with every ask.
struct PlaceAsk {
  uint64_t memory_bytes = 0;
  int port = 0;
  bool relayed = false;    // behind NAT (WorkerOptions::stage_relayed)
  std::string commit_key;  // the public key this worker signs its commitments with (hex)
};
// Asks the hub for a place every second until it gives one (nullopt once `stop` is set).
std::optional<net::PipelinePlace> wait_for_place(net::HubClient& hub, const PlaceAsk& ask,
                                                 const std::atomic<bool>& stop);
// `options` with the place: its stage, its links (direct, or through the relay at the hub's host
// `hub_host`), listening on `port`.
WorkerOptions placed_options(const WorkerOptions& options, const net::PipelinePlace& place,
                             const std::string& hub_host, int port);
// "host" of "http(s)://host:port".
std::string url_host(const std::string& url);

// While a member holds its place: asks again every 2 s (which keeps it), and raises leave() when
// the hub no longer places it in `group_id` (the group was dissolved) or `stop` is set.
class PlaceWatch {
 public:
  // With every ask it reports `health` (null: nothing to report).
  PlaceWatch(net::HubClient& hub, const PlaceAsk& ask, uint64_t group_id,
             const std::atomic<bool>& stop, const GroupHealth* health = nullptr);
  PlaceWatch(const PlaceWatch&) = delete;
  PlaceWatch& operator=(const PlaceWatch&) = delete;
  const std::atomic<bool>& leave() const { return leave_; }

 private:
  std::atomic<bool> leave_{false};
  std::jthread thread_;  // last: stopped and joined before leave_ goes
};

}  // namespace stoa::worker
