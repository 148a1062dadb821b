// Blobs from the swarm (net/swarm/swarm.h): the hub's blobs fetched from peers as well as from
// the hub, and served on to other workers after use. The hub stays the source of truth: the
// torrent (and so every piece hash) comes from the hub over the worker's own authenticated API,
// and the sync checks the whole blob against its content address as for any other source.
//
// Anything the swarm cannot do falls back to the hub's own route (HubBlobSource: the spool and
// its HTTP Range resume): a hub or build without a swarm, a fetch that stalls (no verified
// byte for stall_timeout: no peers and no web seed), a disk error, and a blob asked for a
// second time (the sync refetches only what it refused). A blob the hub's route names as smaller
// than direct_below_bytes — a PULSE patch — comes straight from the hub: it must not wait on the
// swarm (measured on `stoa bench fleet`'s home link: a 125-byte patch took ~8 s through the
// tracker and the web seed, and a worker fell 30 s behind), and its bytes cost the hub little.
#pragma once
#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>

#include "net/swarm/swarm.h"
#include "roles/worker/weight_sync.h"

namespace stoa::worker {

struct SwarmSourceOptions {
  net::swarm::PeerSessionOptions session;
  std::string dir;  // where swarm downloads land (and are seeded from)
  std::chrono::milliseconds stall_timeout{30000};
  // Blobs the hub's route says are smaller than this come from the hub alone (see above).
  uint64_t direct_below_bytes = uint64_t{1} << 20;
};

class SwarmBlobSource final : public BlobSource {
 public:
  // Starts the peer session (throws kUnsupported in a build without a swarm engine).
  SwarmBlobSource(net::HubClient& hub, HubBlobSource& hub_source, SwarmSourceOptions options);
  net::VersionInfo version(std::optional<uint64_t> after, std::chrono::seconds timeout) override;
  std::vector<uint8_t> blob(const std::string& hash_hex) override;
  std::optional<std::string> blob_file(const std::string& hash_hex) override;
  void discard(const std::string& hash_hex) override;
  // The swarm download in progress, else the hub's.
  std::optional<net::BlobDownload> download_progress() const;
  net::swarm::SwarmStats stats() const;
  uint64_t fallbacks() const;

 private:
  // The swarm key's URLs (asked once; nullopt: this hub has no swarm).
  bool ensure_key();
  net::HubClient& hub_;
  HubBlobSource& hub_source_;
  SwarmSourceOptions options_;
  net::swarm::PeerSession session_;
  mutable std::mutex mutex_;
  std::optional<bool> hub_has_swarm_;
  std::string announce_url_, seed_url_;
  std::set<std::string> from_swarm_;  // hashes handed out from the swarm (bounded: see .cpp)
  std::set<std::string> small_;       // hashes the hub's routes named below direct_below_bytes
  std::optional<net::BlobDownload> progress_;
  uint64_t fallbacks_ = 0;
};

struct WorkerOptions;
// The swarm source WorkerOptions::swarm asks for, or null: off, auto with a hub on loopback, or a
// build without a swarm engine (said in the log).
std::unique_ptr<SwarmBlobSource> make_swarm_source(const WorkerOptions& options,
                                                   net::HubClient& hub, HubBlobSource& hub_source,
                                                   const std::string& state_dir);

}  // namespace stoa::worker
