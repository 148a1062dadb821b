// The worker's weight synchronisation: brings a verified int8 state (pulse::Int8State) from
// whatever version it holds to the hub's latest, blob by blob, and never lets a byte it could
// not verify reach the engine. Every blob is checked four ways before it counts: its bytes hash
// to the name it was fetched by, its envelope names the kind and versions the route promised,
// its model fingerprint is the worker's, and the state it produces hashes to the value the
// envelope (and, at the end of the route, the hub's version info) says. apply_patch is all or
// nothing, so a refused patch leaves the state at the last good version.
//
// Recovery ladder for a refused blob: fetch it once more (a transfer error); if it is refused
// again, drop the patch route and catch up from an anchor (a cold plan from the hub); if the
// anchor is refused too, keep the current state and report the failure — a worker with stale
// but correct weights is useful (staleness is bounded by the hub), one with wrong weights is not.
//
// Where the verified state lives is a ResidentStore (weight_sync_store.h): on a worker the
// engine's own weights (EngineStore, weight_sync_engine.h: one resident copy), else an
// Int8State of the sync's own (StateStore: tests, tools). Every blob of a route is fetched and
// proven by its content address before the first is applied, since an anchor written over the
// engine's weights cannot be undone; a route that fails after that leaves the state at the last
// version it verified (correct weights, possibly older than before the route).
//
// Threading: step() runs on the sync thread; the generation thread calls take_update() at a safe
// point between decode steps (and, with an EngineStore, holds pass_lock() during each pass).
#pragma once
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "core/hash.h"
#include "model/config.h"
#include "model/layer_span.h"
#include "net/protocol.h"
#include "pulse/int8_state.h"
#include "pulse/patch.h"
#include "roles/worker/weight_sync_store.h"

namespace stoa::net {
class HubClient;
}

namespace stoa::worker {

// What the sync needs from the hub (HubBlobSource is the real one; tests serve real PULSE blobs
// from memory and can corrupt them on purpose).
class BlobSource {
 public:
  virtual ~BlobSource() = default;
  virtual net::VersionInfo version(std::optional<uint64_t> after, std::chrono::seconds timeout) = 0;
  // The blob's bytes as received (the sync verifies them itself).
  virtual std::vector<uint8_t> blob(const std::string& hash_hex) = 0;
  // The blob as a file on disk, when this source spools downloads (nullopt: it does not, use
  // blob()). Anchors are then decoded streaming from the file, never held in memory whole.
  virtual std::optional<std::string> blob_file(const std::string& /*hash_hex*/) {
    return std::nullopt;
  }
  // The blob's file is no longer needed (applied, or refused: a refetch must start afresh).
  virtual void discard(const std::string& /*hash_hex*/) {}
};

// The hub's blobs. With a spool dir, each download goes to <spool_dir>/<hash>.blob and resumes
// from there with HTTP Range after a dropped connection or a worker restart
// (net/spool_download.h); its progress goes to the log and to download_progress() (the heartbeat
// reports it to the hub).
class HubBlobSource final : public BlobSource {
 public:
  explicit HubBlobSource(net::HubClient& hub, std::string spool_dir = {});
  net::VersionInfo version(std::optional<uint64_t> after, std::chrono::seconds timeout) override;
  std::vector<uint8_t> blob(const std::string& hash_hex) override;
  std::optional<std::string> blob_file(const std::string& hash_hex) override;
  void discard(const std::string& hash_hex) override;
  // The download in progress (nullopt between downloads).
  std::optional<net::BlobDownload> download_progress() const;

 private:
  std::string spool_path(const std::string& hash_hex) const;
  net::HubClient& hub_;
  std::string spool_dir_;
  mutable std::mutex progress_mutex_;
  std::optional<net::BlobDownload> progress_;
};

struct SyncCounters {
  uint64_t blobs_applied = 0;
  uint64_t bytes_fetched = 0;
  uint64_t blobs_refused = 0;  // failed a check (hash, header, fingerprint, apply)
  uint64_t refetches = 0;
  uint64_t anchor_fallbacks = 0;
  uint64_t failed_syncs = 0;  // the ladder ran out; the state stayed where it was
};

class WeightSync {
 public:
  // expected_config_hash: pulse::config_hash of the model the worker runs (nullopt: accept the
  // first anchor's and then hold every later blob to it). The state is the sync's own Int8State.
  WeightSync(BlobSource& source, std::optional<Hash128> expected_config_hash);
  // A worker's sync: the engine's weights for `config` are the one copy (EngineStore); the
  // first take_update after the first anchor hands them over (WeightUpdate::engine).
  WeightSync(BlobSource& source, const ModelConfig& config);
  // A pipeline stage's sync: the engine holds only `span`'s tensors (EngineStore).
  WeightSync(BlobSource& source, const ModelConfig& config, LayerSpan span);
  WeightSync(BlobSource& source, std::optional<Hash128> expected_config_hash,
             std::unique_ptr<ResidentStore> store);

  // One round: long-polls the hub for a version above the one held (at most `timeout`) and
  // catches up. Returns true when the verified version advanced. Throws only for transport
  // failures of the version call itself (the caller backs off and retries).
  bool step(std::chrono::seconds timeout);

  // The verified version (nullopt before the first anchor).
  std::optional<uint64_t> version() const;
  std::optional<uint64_t> latest_seen() const;
  uint64_t max_staleness() const;
  SyncCounters counters() const;
  std::string last_error() const;
  // The blob being fetched now, with its kind and versions (nullopt between fetches): what the
  // volunteer's download line names (progress_report.h) — the source knows only its hash.
  std::optional<net::BlobRef> fetching() const;

  // The changes since the last take (nullopt when the engine is current). With an EngineStore
  // they are written into the engine by this call (the generation thread's safe point).
  std::optional<WeightUpdate> take_update(UpdateForm form = UpdateForm::kTensors);
  // Only as far as `version` (ResidentStore::take_update_through: a pipeline stage).
  std::optional<WeightUpdate> take_update_through(uint64_t version) {
    return store_->take_update_through(version);
  }
  // The version the engine computes with (version() may be ahead by updates not taken yet).
  uint64_t engine_version() const { return store_->engine_version(); }
  // Generation thread: hold during each decode pass; false while the engine must not compute.
  std::shared_lock<std::shared_mutex> pass_lock() { return store_->pass_lock(); }
  bool engine_usable() const { return store_->engine_usable(); }
  // ResidentStore::exclusive_lock and engine_holds.
  std::unique_lock<std::shared_mutex> exclusive_lock() { return store_->exclusive_lock(); }
  bool engine_holds(uint64_t version) const { return store_->engine_holds(version); }
  // Generation thread, before the runner that holds the engine goes away.
  void detach_engine() { store_->detach_engine(); }

  // For tests and the resume path: the verified state itself (a copy; read out of the engine
  // with an EngineStore).
  pulse::Int8State snapshot() const;

 private:
  // Applies one route (anchor and/or patches) to the store. Throws on any refusal.
  void apply_route(const std::vector<net::BlobRef>& route, bool allow_refetch);
  // A blob held whole in memory (patches; every blob of a source without files) or, for an
  // anchor from a spooling source, the path of its file (verified while it is decoded).
  struct Fetched {
    std::vector<uint8_t> bytes;
    std::string path;
  };
  Fetched fetch_verified(const net::BlobRef& ref, bool allow_refetch);
  void apply_blob(const net::BlobRef& ref, const Fetched& blob);
  void apply_anchor(const net::BlobRef& ref, const Fetched& blob);
  friend class AnchorToStore;

  BlobSource& source_;
  std::unique_ptr<ResidentStore> store_;
  mutable std::mutex mutex_;  // guards what follows
  std::optional<Hash128> expected_config_;
  std::optional<uint64_t> latest_seen_;
  uint64_t max_staleness_ = 0;
  SyncCounters counters_;
  std::string last_error_;
  std::optional<net::BlobRef> fetching_;
};

}  // namespace stoa::worker
