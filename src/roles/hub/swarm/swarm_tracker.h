// The hub's part in the swarm (net/swarm/swarm.h): a torrent for each blob it serves, made once
// from its own file and kept beside it, and the swarm's tracker. A worker gets a swarm key
// (POST /v1/swarm/key) that names it in the tracker and web-seed URLs libtorrent calls without
// our headers; the key grants nothing but announcing and reading blobs, so a key seen by a
// TLS interceptor (libtorrent cannot pin the hub's certificate) does not open the worker's
// session.
//
// A key is the worker's id and a MAC of it under a secret the hub keeps on disk: nothing to
// remember per worker, and valid across hub restarts. A worker that serves nobody (`stoa work
// --no-serve`) says so when it asks for its key, and the key says it: such a peer is never in
// another's peer list (it would take a connection and answer nothing) nor counted as holding a
// piece it took from the web seed. A worker that says it serves and does not is bounded by the
// web seed's waits. Bounded: torrents only for blobs in the store
// (at most kMaxTorrents remembered, the oldest forgotten whole), peers per torrent at most
// kMaxPeers (the stalest leave first), and a peer not heard from in three announce intervals leaves
// the list. A quarantined or unknown worker's announce is refused.
#pragma once
#include <array>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "core/hash.h"
#include "core/rng.h"
#include "net/swarm/swarm.h"
#include "pulse/blob_store.h"
#include "roles/hub/identity/rate_limit.h"

namespace stoa::hub {

// Whom a swarm key names, and whether that worker serves other workers.
struct SwarmKeyHolder {
  std::string worker;
  bool serves = true;
};

struct SwarmAnnounce {
  std::string info_hash;  // the 20 raw bytes
  std::string ip;         // as the hub saw the connection
  uint16_t port = 0;
  uint64_t left = 0;
  std::string event;  // "started", "completed", "stopped" or empty
};

struct SwarmTrackerStats {
  size_t torrents = 0;
  size_t peers = 0;  // entries over every torrent
  size_t seeds = 0;  // of them, holding the whole blob
  uint64_t announces = 0;
  uint64_t web_seed_refusals = 0;      // ranges whose pieces had left the hub often enough
  uint64_t web_seed_ranges = 0;        // ranges the web seed was allowed to send
  uint64_t web_seed_bytes = 0;         // their bytes
  uint64_t web_seed_resent_bytes = 0;  // of them, pieces sent again because they were stuck
  // Of them, not sent: the reply ended first, or the worker's fetch allowance refused it.
  uint64_t web_seed_cut_bytes = 0;
  uint64_t torrents_made = 0;
};

struct SwarmTrackerOptions {
  // The web seed's share (web_seed_allowed): each piece leaves the hub at most `web_seed_copies`
  // times, and a piece's copies after its first only while the blob's bytes out, with the first
  // copies still to go, stay within `web_seed_budget` blob sizes; a piece no copy of which left
  // for `reseed_after` goes again (web_seed_allowed says when: later while a worker that took it
  // is still in the swarm, and later each time it went again).
  int web_seed_copies = 2;
  double web_seed_budget = 1.5;
  std::chrono::seconds reseed_after{5};
  int interval_s = 15;  // the announce interval workers are told
};

class SwarmTracker {
 public:
  static constexpr size_t kMaxTorrents = 256;
  static constexpr size_t kMaxPeers = 2000;
  // The wait before a stuck piece goes again, in `reseed_after`s: this many while a worker that
  // took a copy is still in the swarm, doubled each time the piece went again, at most kMaxWait.
  static constexpr int kReseedWaitWhileHeld = 4;
  static constexpr int kMaxReseedWait = 8;
  // `worker_ok(worker_id)`: false for a worker no longer allowed (quarantined).
  SwarmTracker(pulse::BlobStore& store, std::function<bool(const std::string&)> worker_ok,
               SwarmTrackerOptions options = {});

  // The worker's key (the same one for every call of that worker and `serves`).
  std::string key_for(const std::string& worker_id, bool serves = true);
  // Whom a key names, or nullopt (an unknown key, or a worker no longer allowed).
  std::optional<SwarmKeyHolder> holder_of(const std::string& key);
  // The blob's torrent (made on first use; hashing the file). Throws kNotFound for a blob the
  // store does not hold.
  std::vector<char> torrent(const Hash128& blob);
  // A bencoded tracker reply (a failure reply for an unknown torrent or key).
  std::string announce(const std::string& key, const SwarmAnnounce& a);
  // The web seed's share: may a worker have bytes [first, first + length) of `blob` from the
  // hub now? Each piece leaves the hub at most `web_seed_copies` times, and a copy after the
  // first only within the blob's `web_seed_budget`, less the room the first copies not yet sent
  // will take: a small swarm gets a second copy of much of the blob (the hub's uplink is a good
  // part of what it has), a large one the first copy of every piece and the rest from peers.
  // After that the workers that have a piece serve it, and the hub sends it again only when no
  // copy has left for a while: `reseed_after` once the workers that took it have left the swarm,
  // kReseedWaitWhileHeld times that while one of them is still there (slow to pass it on, or
  // unreachable), doubled each time it went again. Counts the pieces of an allowed range as sent
  // to `worker` (when allowed; a reply cut short gives back what did not arrive, web_seed_cut).
  bool web_seed_allowed(const Hash128& blob, uint64_t first, uint64_t length,
                        const std::string& worker = {});
  // An allowed range whose reply ended before its last byte (the worker closed the connection:
  // it got the piece elsewhere, or libtorrent dropped the web seed): its pieces' copies are
  // taken back (those of which no byte was delivered — acknowledged by the worker's TCP: a
  // piece begun stays sent, so a hostile worker cannot draw it again and again), so a piece
  // nobody received is not held back.
  void web_seed_cut(const Hash128& blob, uint64_t first, uint64_t length, uint64_t delivered,
                    const std::string& worker = {});
  // The uplink probe's share (POST /v1/swarm/uplink, roles/worker/uplink_probe.h): 0 when the
  // worker may post a probe body now, else the milliseconds until it may. A measurement is a
  // handful of posts at a worker's start; the bucket holds two and refills in a minute, so a
  // worker cannot turn the probe into a flood of the hub's downlink.
  int64_t uplink_probe_wait_ms(const std::string& worker);
  SwarmTrackerStats stats() const;

 private:
  struct Peer {
    std::string worker;
    bool serves = true;
    uint64_t left = 0;
    std::chrono::steady_clock::time_point seen;
  };
  struct Swarm {
    std::map<std::pair<std::string, uint16_t>, Peer> peers;
  };
  // Per blob: how often and when each piece last left through the web seed, and to whom.
  struct PieceLedger {
    static constexpr uint16_t kNobody = 0xFFFF;
    uint64_t piece_bytes = 0;
    uint64_t blob_bytes = 0;
    uint64_t sent_bytes = 0;    // out of the web seed, every copy
    uint64_t unsent_bytes = 0;  // of the pieces that never left it
    std::vector<uint8_t> sent;
    std::vector<uint8_t> resent;  // how often it went again because it was stuck
    std::vector<std::chrono::steady_clock::time_point> last;
    // The last few workers each piece went to (indices into `takers`; kNobody: none), and the
    // workers the web seed sent this blob to (at most kMaxPeers of them; later ones go unnamed).
    std::vector<std::array<uint16_t, 4>> took;
    std::vector<std::string> takers;
    std::map<std::string, uint16_t> taker_index;
  };
  // Whether a worker that took piece `p` is still in the blob's swarm (announced, not stopped).
  bool held_in_swarm_locked(const std::string& blob_hex, const PieceLedger& ledger, size_t p,
                            std::chrono::steady_clock::time_point now) const;
  uint16_t taker_locked(PieceLedger& ledger, const std::string& worker);
  void remember_locked(const std::string& blob_hex, const net::swarm::Torrent& torrent);
  void expire_locked(Swarm& s, std::chrono::steady_clock::time_point now);

  pulse::BlobStore& store_;
  std::function<bool(const std::string&)> worker_ok_;
  const SwarmTrackerOptions options_;
  std::map<std::string, PieceLedger> pieces_;  // blob hex ->
  mutable std::mutex mutex_;
  std::mutex make_mutex_;  // one torrent hashed at a time (a 9 GB anchor takes a while)
  std::string secret_;     // keys are worker id + a MAC under it (kept beside the torrents)
  std::deque<std::string> remembered_;  // blob hex, oldest first (at most kMaxTorrents)
  std::map<std::string, std::vector<char>> torrents_;    // blob hex -> .torrent bytes
  std::map<std::string, Swarm> swarms_;                  // blob hex -> its peers
  std::map<std::string, std::string> announce_to_blob_;  // v1 and v2 announce hashes (hex)
  uint64_t announces_ = 0, torrents_made_ = 0, web_seed_refusals_ = 0;
  uint64_t web_seed_ranges_ = 0, web_seed_bytes_ = 0, web_seed_resent_bytes_ = 0;
  uint64_t web_seed_cut_bytes_ = 0;
  RateLimiter uplink_probes_{RateLimit{12.0 / 60.0, 12.0}, 10'000};  // per worker, in posts
  Rng shuffle_{static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()),
               29};
};

}  // namespace stoa::hub
