// `stoa work`: one rollout worker. Threads:
//   - sync (sync_thread.h): long-polls the hub and keeps a verified int8 state (WeightSync);
//   - heartbeat (heartbeat.h): renews the leases in progress, learns of cancelled ones;
//   - streamer: sends each finished rollout the moment it is done (RolloutStreamer);
//   - checks (check_thread.h): replays other workers' rollouts the hub leases to it;
//   - progress report (progress_report.h): the volunteer's lines, from the gauges once a second;
//   - generation (the caller's thread, rollout_loop.h): leases groups (lease_book.h) and runs up
//     to `slots` multi-turn rollouts as one batch on the EpisodeRunner, switching weights
//     between decode steps.
// Sync, heartbeat, checks and report are owned by one WorkerThreads (worker_threads.h), stopped
// and joined together. The start-up every kind of worker shares — state dir, hub client, the join
// that resumes the identity kept in the state dir, run files, memory — is a WorkerSession
// (worker_session.h). Every sampled token is tagged with the version of the weights whose logits
// it was drawn from.
#pragma once
#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "core/signing.h"
#include "env/task_registry.h"
#include "gpu/engine_backend_choice.h"

namespace stoa::worker {

struct GroupHealth;  // stage_worker.h

struct WorkerOptions {
  std::string hub_url;
  std::string join_token;
  std::string join_string;  // or: URL + token + certificate pin in one (net/join_string.h)
  std::string name = "worker";
  // config.json + tokenizer.json of the run's model; empty: fetched from the hub into
  // <state dir>/model (run_files.h). The weights always come from the hub.
  std::string model_dir;
  // This machine's options of the run's task (where its tools are: TaskKeys::local); the run's
  // own options come with the join reply.
  env::TaskOptions task_options;
  std::string state_dir;  // worker id and rollout spool, for resuming after a restart
  int threads = 0;        // engine threads (0: the global pool's default)
  // What computes the rollouts (gpu/engine_backend_choice.h): the CPU engine, a Vulkan GPU
  // after its golden self-test, or auto (a GPU that passes, else the CPU).
  gpu::BackendChoice backend = gpu::BackendChoice::kCpu;
  int slots = 4;              // rollouts generated together
  double max_minutes = 0;     // 0: until stopped
  uint64_t seed = 0;          // 0: from the clock
  int shutdown_grace_s = 20;  // on stop: finish rollouts this long, then release the rest
  int join_timeout_s = 60;    // keep retrying an unreachable hub this long at start
  double max_memory_mb = 0;   // > 0: refuse a model that needs more (memory_check.h)
  bool progress = true;       // plain-words progress lines on stdout (progress_report.h)
  // Take the hub's peer checks (check_thread.h): other workers' rollouts replayed on a thread of
  // their own. Off: this worker is never a checker (a hub with peer checks then relies on the
  // others and its own replay).
  bool peer_checks = true;
  // Blobs from peers as well as the hub (swarm_source.h). kAuto: on with a hub beyond loopback
  // (on loopback every worker shares the hub's machine: peers would add nothing).
  enum class Swarm { kAuto, kOn, kOff } swarm = Swarm::kAuto;
  bool serve = true;  // serve used blobs to other workers (--no-serve: never upload)
  // The cap on what is served (KiB/s; 0: none). Unset: `upload_share` of the upload rate
  // measured against the hub at start (uplink_probe.h); 1024 KiB/s when that cannot be measured.
  std::optional<int> upload_kib_s;
  // Half: the volunteer's own traffic keeps the other half of the uplink (libtorrent's uTP
  // yields further when the link queues), and a worker that serves at half its uplink still
  // passes a piece on about as fast as a home downlink of five times its uplink takes it in.
  double upload_share = 0.5;
  std::string swarm_listen;  // libtorrent listen interfaces (empty: any address, a free port)
  // One stage of a pipeline group (stage_worker.h, docs/design/pipeline.md): the model cut into
  // `stages` contiguous spans of layers (split_layers), this worker holding span `stage` and
  // syncing only its tensors. Stage 0, the head, leases and drives the rollouts through a link to
  // stage 1 at `stage_next`; a later stage serves the stage before it at `stage_listen` and
  // links to `stage_next` (none on the last). 1: the whole model, as every worker by default.
  int stages = 1;
  int stage = 0;
  std::string stage_listen = "0.0.0.0:0";
  std::string stage_next;
  int stage_wait_s = 120;  // how long a stage waits for the weights version its head names
  // A group's head: its slots cut into this many micro-batches, each a pass down the chain at
  // the same time as the others' (0: one per stage, K). Ignored by whole workers and later stages.
  int micro_batches = 0;
  // Behind NAT (--stage-relay): in a group the hub forms, the hop into this worker's stage goes
  // through the hub's stage relay. The relay's host:port and the keys come with the place.
  bool stage_relayed = false;
  std::string stage_relay;
  std::string stage_serve_key;  // serve the stage before through the relay under this key
  std::string stage_next_key;   // reach the next stage through the relay under this key
  // In a group the hub formed: its id, the key this member signs its commitments with and every
  // stage's public key (core/stage_commitment.h; none: a group formed by hand, which commits to
  // nothing).
  uint64_t pipeline_group = 0;
  std::optional<SigningKey> stage_commit_key;
  std::vector<PublicKey> stage_keys;
  // In a group the hub formed: where this member counts its group's breaks, which it reports
  // with its asks (null otherwise).
  std::shared_ptr<GroupHealth> group_health;
};

struct WorkerStats {
  uint64_t rollouts_finished = 0;
  uint64_t tokens_generated = 0;
  uint64_t weight_switches = 0;
  uint64_t leases = 0;
  uint64_t leases_released = 0;
  double idle_fraction = 0;
  bool run_ended = false;  // stopped because the hub said the run is over
};

// Runs until `stop` is set (SIGINT/SIGTERM), max_minutes, or the hub says the run is over
// (stats.run_ended); returns the stats. Throws on a
// configuration error (bad model dir), net::JoinRefused when the hub refuses the join, kNetwork
// when the hub stays unreachable for join_timeout_s, kIo when the model does not fit in memory
// or on disk, kIntegrity when the hub quarantines the worker or sends another model's weights
// (failure_advice.h words each for the volunteer).
WorkerStats run_worker(const WorkerOptions& options, const std::atomic<bool>& stop);

}  // namespace stoa::worker
