// The swarm: PULSE blobs spread worker to worker with BitTorrent (libtorrent-rasterbar), so the
// hub's uplink need not grow with the fleet. The hub stays the source of truth: it makes one
// private BitTorrent torrent (v1 and v2 hashes) per blob from its own file (the torrent's single
// file is named by the blob's content hash), acts as the swarm's only tracker and serves its HTTP
// blob route as a web seed, so a swarm of one still finishes. A worker fetches the torrent from the
// hub over its authenticated API, downloads from peers and the web seed at once, and every 16 KiB
// block is checked against the v2 merkle tree the hub made (a peer that sends a bad block is
// identified and banned); the blob is then checked again by its content hash before use, as
// every blob is. What a worker has used it keeps seeding, with its upload capped.
//
// This header is the whole of the swarm's interface; libtorrent is seen only by the .cpp files
// beside it. A build without libtorrent (the aarch64 cross build, whose sysroot has none) links
// swarm_absent.cpp instead: available() is false and every call throws kUnsupported, and the
// worker then fetches from the hub alone, as before.
#pragma once
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace stoa::net::swarm {

// Whether this build has a swarm engine.
bool available();

// ---- the hub's side ----

struct Torrent {
  std::vector<char> bytes;    // the bencoded .torrent
  std::vector<std::string> announce_hashes;  // hex of the 20 bytes it is announced with
  uint64_t size = 0;          // the blob's bytes
  int piece_bytes = 0;
};

// A private torrent (hybrid: v1 and v2 hashes) of the single file `dir`/`name` (hashes the
// whole file).
// Throws kIo for a missing or unreadable file.
Torrent make_torrent(const std::string& dir, const std::string& name);
// The announce hash and size of a torrent made earlier (kBadFormat for bytes that are not one).
Torrent parse_torrent(std::vector<char> bytes);

struct PeerAddress {
  std::string ip;  // dotted IPv4 or IPv6 text
  uint16_t port = 0;
};
// Bencoded tracker replies (BEP 3, compact peer lists: BEP 23 and BEP 7).
std::string announce_reply(const std::vector<PeerAddress>& peers, int interval_s, int complete,
                           int incomplete);
std::string announce_failure(const std::string& reason);

// ---- the worker's side ----

struct PeerSessionOptions {
  std::string listen = "0.0.0.0:6881,[::]:6881";  // libtorrent listen_interfaces
  int upload_kib_s = 1024;                        // cap on what this worker serves; 0: no cap
  bool serve = true;               // false: downloads only, never uploads, seeds nothing after use
  int keep_blobs = 8;              // blobs kept seeding after use (the oldest go first)
  bool nat_traversal = true;       // UPnP and NAT-PMP port mapping on the home router
  bool one_host = false;           // several peers on one address (tests on loopback)
  bool validate_https = true;      // false: the hub's certificate is pinned by us, not by a CA
  std::string outgoing_interface;  // address (or device) outgoing connections leave from
};

struct FetchProgress {
  uint64_t bytes = 0;
  uint64_t total = 0;
  double bytes_per_s = 0;
  double eta_s = -1;
  int peers = 0;  // connected peers (the web seed not counted)
};

struct FetchRequest {
  std::vector<char> torrent;
  std::string tracker_url;   // the hub's announce URL (with the worker's swarm key)
  std::string web_seed_url;  // the hub's blob route for this blob
  std::string save_dir;      // the blob lands at save_dir/<name in the torrent>
  // No new verified byte for this long: the fetch gives up (kNetwork) and the caller falls back
  // to the hub's own route.
  std::chrono::milliseconds stall_timeout{60000};
  std::chrono::milliseconds progress_interval{1000};
  std::function<void(const FetchProgress&)> on_progress;
};

struct SwarmStats {
  uint64_t uploaded_bytes = 0;    // payload served to peers, every torrent since the start
  uint64_t from_peers_bytes = 0;  // payload received from peers (not the web seed)
  uint64_t from_hub_bytes = 0;    // payload received from the hub's web seed
  int serving_peers = 0;          // peers this worker is uploading to now
  int connected_peers = 0;
  int seeding = 0;        // blobs held and offered
  int banned_peers = 0;   // banned for bad data
  int hash_failures = 0;  // pieces that failed their hash (and were fetched again)
  int listen_port = 0;
  bool serve = false;
  int upload_kib_s = 0;
};

class PeerSession {
 public:
  explicit PeerSession(const PeerSessionOptions& options);
  ~PeerSession();
  PeerSession(const PeerSession&) = delete;
  PeerSession& operator=(const PeerSession&) = delete;

  // Downloads the torrent's file (resuming what save_dir already holds of it) and returns its
  // path once every piece is verified. Throws kNetwork when it stalls, kIo on a disk error,
  // kBadFormat for a bad torrent. On a throw the torrent is removed from the session.
  std::string fetch(const FetchRequest& request);
  // The blob at `path` was used: keep seeding it (within keep_blobs), or, not serving, drop it.
  void release(const std::string& path);
  SwarmStats stats() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace stoa::net::swarm
