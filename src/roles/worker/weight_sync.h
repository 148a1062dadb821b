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
// Threading: step() runs on the sync thread; the generation thread calls take_update() at a safe
// point between decode steps. One mutex guards the state: take_update copies only the tensors
// touched since the last take, so the generation thread holds the lock briefly.
#pragma once
#include <chrono>
#include <cstdint>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/hash.h"
#include "net/protocol.h"
#include "pulse/int8_state.h"
#include "pulse/patch.h"

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

// A batch of changes for the engine: `full` after an anchor (every tensor), else the tensors
// patched since the last take — or, taken as kPatches, the verified patches themselves, which
// the engine scatters in place (engine_update.h: no tensor copies, no repack). The StateTensor
// copies are taken under the sync lock.
struct WeightUpdate {
  uint64_t version = 0;
  Hash128 state_hash;
  bool full = false;
  std::vector<std::pair<std::string, pulse::StateTensor>> tensors;
  std::vector<pulse::Patch> patches;  // in order; set only for UpdateForm::kPatches
};
enum class UpdateForm {
  kTensors,  // copies of the touched tensors
  // The patches applied since the last take, when they are all still held (tensors otherwise:
  // after an anchor, or when they grew past 1/8 of the state's values).
  kPatches,
};

class WeightSync {
 public:
  // expected_config_hash: pulse::config_hash of the model the worker runs (nullopt: accept the
  // first anchor's and then hold every later blob to it).
  WeightSync(BlobSource& source, std::optional<Hash128> expected_config_hash);

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

  // The changes since the last take (nullopt when the engine is current).
  std::optional<WeightUpdate> take_update(UpdateForm form = UpdateForm::kTensors);

  // For tests and the resume path: the verified state itself (copy, under the lock).
  pulse::Int8State snapshot() const;

 private:
  // Applies one route (anchor and/or patches) to a working state. Throws on any refusal; on
  // return the state is at the route's last version and `touched` lists what changed.
  void apply_route(const std::vector<net::BlobRef>& route, bool allow_refetch);
  // A blob held whole in memory (patches; every blob of a source without files) or, for an
  // anchor from a spooling source, the path of its file (verified while it is decoded).
  struct Fetched {
    std::vector<uint8_t> bytes;
    std::string path;
  };
  Fetched fetch_verified(const net::BlobRef& ref, bool allow_refetch);
  void apply_blob(const net::BlobRef& ref, const Fetched& blob);
  void apply_anchor(const net::BlobRef& ref, pulse::Int8State fresh);

  BlobSource& source_;
  std::optional<Hash128> expected_config_;
  mutable std::mutex mutex_;
  pulse::Int8State state_;
  bool have_state_ = false;
  bool full_pending_ = false;
  std::set<std::string> touched_;
  bool update_pending_ = false;
  // The patches applied since the last take (for UpdateForm::kPatches); dropped, with
  // patches_held_ false, once they would cost more than copying the touched tensors.
  std::vector<pulse::Patch> patches_;
  bool patches_held_ = true;
  uint64_t patch_values_ = 0;
  std::optional<uint64_t> latest_seen_;
  uint64_t max_staleness_ = 0;
  SyncCounters counters_;
  std::string last_error_;
};

}  // namespace stoa::worker
