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
};

class HubBlobSource final : public BlobSource {
 public:
  explicit HubBlobSource(net::HubClient& hub) : hub_(hub) {}
  net::VersionInfo version(std::optional<uint64_t> after, std::chrono::seconds timeout) override;
  std::vector<uint8_t> blob(const std::string& hash_hex) override;

 private:
  net::HubClient& hub_;
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
// patched since the last take. The StateTensor copies are taken under the sync lock.
struct WeightUpdate {
  uint64_t version = 0;
  Hash128 state_hash;
  bool full = false;
  std::vector<std::pair<std::string, pulse::StateTensor>> tensors;
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
  std::optional<WeightUpdate> take_update();

  // For tests and the resume path: the verified state itself (copy, under the lock).
  pulse::Int8State snapshot() const;

 private:
  // Applies one route (anchor and/or patches) to a working state. Throws on any refusal; on
  // return the state is at the route's last version and `touched` lists what changed.
  void apply_route(const std::vector<net::BlobRef>& route, bool allow_refetch);
  std::vector<uint8_t> fetch_verified(const net::BlobRef& ref, bool allow_refetch);
  void apply_blob(const net::BlobRef& ref, const std::vector<uint8_t>& bytes);

  BlobSource& source_;
  std::optional<Hash128> expected_config_;
  mutable std::mutex mutex_;
  pulse::Int8State state_;
  bool have_state_ = false;
  bool full_pending_ = false;
  std::set<std::string> touched_;
  bool update_pending_ = false;
  std::optional<uint64_t> latest_seen_;
  uint64_t max_staleness_ = 0;
  SyncCounters counters_;
  std::string last_error_;
};

}  // namespace stoa::worker
