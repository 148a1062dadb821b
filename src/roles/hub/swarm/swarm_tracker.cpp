#include "roles/hub/swarm/swarm_tracker.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "core/error.h"
#include "core/file_bytes.h"
#include "core/log.h"
#include "core/rng.h"
#include "net/protocol.h"
#include "net/secret.h"

namespace stoa::hub {
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

std::string hex_of(const std::string& raw) {
  static const char* kDigits = "0123456789abcdef";
  std::string out;
  for (const char c : raw) {
    const auto b = static_cast<uint8_t>(c);
    out += kDigits[b >> 4];
    out += kDigits[b & 15];
  }
  return out;
}

}  // namespace

namespace {

SwarmTrackerOptions checked(SwarmTrackerOptions o) {
  o.web_seed_copies = std::clamp(o.web_seed_copies, 1, 255);
  o.web_seed_budget = std::max(1.0, o.web_seed_budget);
  o.reseed_after = std::max(std::chrono::seconds(1), o.reseed_after);
  o.interval_s = std::max(1, o.interval_s);
  return o;
}

}  // namespace

SwarmTracker::SwarmTracker(pulse::BlobStore& store,
                           std::function<bool(const std::string&)> worker_ok,
                           SwarmTrackerOptions options)
    : store_(store), worker_ok_(std::move(worker_ok)), options_(checked(options)) {
  // The keys' secret lives beside the torrents, so keys outlive a hub restart: a worker's
  // libtorrent goes on announcing with the URL it was given.
  const fs::path path = fs::path(store_.dir()) / "torrents" / "swarm_secret";
  fs::create_directories(path.parent_path());
  if (fs::exists(path)) {
    std::ifstream in(path);
    std::getline(in, secret_);
  }
  if (secret_.size() < 32) {
    secret_ = net::random_token();
    write_file_atomic(path.string(),
                      std::span(reinterpret_cast<const uint8_t*>(secret_.data()), secret_.size()));
    fs::permissions(path, fs::perms::owner_read | fs::perms::owner_write);
  }
  // The torrents made before a restart: workers go on announcing them. One whose blob is gone
  // (pruned) goes too.
  for (const auto& entry : fs::directory_iterator(path.parent_path())) {
    if (entry.path().extension() != ".torrent") continue;
    const std::string blob_hex = entry.path().stem().string();
    Hash128 blob;
    std::error_code ec;
    if (!Hash128::parse(blob_hex, &blob) || !fs::exists(store_.path_of(blob))) {
      fs::remove(entry.path(), ec);
      continue;
    }
    std::ifstream in(entry.path(), std::ios::binary);
    std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    try {
      remember_locked(blob_hex, net::swarm::parse_torrent(std::move(bytes)));
    } catch (const Error& e) {
      log_warn("swarm", "torrent cache ", entry.path().string(), ": ", e.what(), "; removed");
      fs::remove(entry.path(), ec);
    }
  }
}

// A serving worker's key ends in 32 hex digits; a fetch-only one's in "n" and 32 others (the
// MAC covers the difference, so a key cannot be turned into the other kind).
std::string SwarmTracker::key_for(const std::string& worker_id, bool serves) {
  if (serves) return worker_id + "-" + net::sha256_hex(secret_ + ":" + worker_id).substr(0, 32);
  return worker_id + "-n" + net::sha256_hex(secret_ + ":fetch-only:" + worker_id).substr(0, 32);
}

std::optional<SwarmKeyHolder> SwarmTracker::holder_of(const std::string& key) {
  const size_t dash = key.rfind('-');
  if (dash == std::string::npos || dash == 0 || dash + 1 == key.size()) return std::nullopt;
  SwarmKeyHolder holder{key.substr(0, dash), key[dash + 1] != 'n'};
  if (!net::constant_time_equal(key, key_for(holder.worker, holder.serves))) return std::nullopt;
  if (worker_ok_ && !worker_ok_(holder.worker)) return std::nullopt;
  return holder;
}

std::vector<char> SwarmTracker::torrent(const Hash128& blob) {
  const std::string hex = blob.hex();
  {
    std::lock_guard lock(mutex_);
    auto it = torrents_.find(hex);
    if (it != torrents_.end()) return it->second;
  }
  STOA_CHECK(fs::exists(store_.path_of(blob)), ErrorKind::kNotFound, "blob ", hex,
             " is not on this hub");
  std::lock_guard making(make_mutex_);
  {
    std::lock_guard lock(mutex_);
    auto it = torrents_.find(hex);
    if (it != torrents_.end()) return it->second;  // made while this call waited
  }
  // Kept beside the blobs so a restarted hub does not hash its anchors again. A torrent file
  // that does not parse or names another blob is made anew.
  const fs::path cached = fs::path(store_.dir()) / "torrents" / (hex + ".torrent");
  std::optional<net::swarm::Torrent> made;
  if (fs::exists(cached)) {
    std::ifstream in(cached, std::ios::binary);
    std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    try {
      made = net::swarm::parse_torrent(std::move(bytes));
    } catch (const Error& e) {
      log_warn("swarm", "torrent cache ", cached.string(), ": ", e.what(), "; made again");
    }
  }
  if (!made) {
    made = net::swarm::make_torrent(store_.dir(), hex);
    fs::create_directories(cached.parent_path());
    write_file_atomic(
        cached.string(),
        std::span(reinterpret_cast<const uint8_t*>(made->bytes.data()), made->bytes.size()));
    log_info("swarm", "torrent of blob ", hex.substr(0, 12), ": ", made->size, " bytes in ",
             made->size / std::max(1, made->piece_bytes), " pieces of ", made->piece_bytes);
  }
  std::lock_guard lock(mutex_);
  ++torrents_made_;
  remember_locked(hex, *made);
  return made->bytes;
}

void SwarmTracker::remember_locked(const std::string& blob_hex, const net::swarm::Torrent& t) {
  // The oldest blob goes whole (torrent, peers, pieces, announce hashes): a long run makes a
  // blob per version, and the versions still in use are the newest. A worker still announcing
  // an evicted one is told it is unknown until the torrent is asked for again.
  if (!torrents_.count(blob_hex)) {
    remembered_.push_back(blob_hex);
    while (remembered_.size() > kMaxTorrents) {
      const std::string old = remembered_.front();
      remembered_.pop_front();
      torrents_.erase(old);
      swarms_.erase(old);
      pieces_.erase(old);
      std::erase_if(announce_to_blob_, [&](const auto& alias) { return alias.second == old; });
    }
  }
  torrents_[blob_hex] = t.bytes;
  swarms_[blob_hex];
  for (const std::string& h : t.announce_hashes) announce_to_blob_[h] = blob_hex;
  PieceLedger& ledger = pieces_[blob_hex];
  if (ledger.piece_bytes == 0 && t.piece_bytes > 0) {
    ledger.piece_bytes = static_cast<uint64_t>(t.piece_bytes);
    const size_t n = static_cast<size_t>((t.size + ledger.piece_bytes - 1) / ledger.piece_bytes);
    ledger.blob_bytes = t.size;
    ledger.unsent_bytes = t.size;
    ledger.sent.assign(n, 0);
    ledger.resent.assign(n, 0);
    ledger.took.assign(n, {PieceLedger::kNobody, PieceLedger::kNobody, PieceLedger::kNobody,
                           PieceLedger::kNobody});
    ledger.last.assign(n, {});
  }
}

uint16_t SwarmTracker::taker_locked(PieceLedger& ledger, const std::string& worker) {
  if (worker.empty()) return PieceLedger::kNobody;
  auto it = ledger.taker_index.find(worker);
  if (it != ledger.taker_index.end()) return it->second;
  // Bounded as the peer list is: past that many, a taker goes unnamed and its pieces wait as
  // if it had left (the wait before takers were named).
  if (ledger.takers.size() >= kMaxPeers) return PieceLedger::kNobody;
  const auto index = static_cast<uint16_t>(ledger.takers.size());
  ledger.takers.push_back(worker);
  ledger.taker_index.emplace(worker, index);
  return index;
}

bool SwarmTracker::held_in_swarm_locked(const std::string& blob_hex, const PieceLedger& ledger,
                                        size_t p, Clock::time_point now) const {
  auto swarm = swarms_.find(blob_hex);
  if (swarm == swarms_.end()) return false;
  const auto ttl = std::chrono::seconds(3 * options_.interval_s);  // as expire_locked
  for (const auto& [address, peer] : swarm->second.peers) {
    if (now - peer.seen > ttl || !peer.serves) continue;
    for (const uint16_t t : ledger.took[p])
      if (t != PieceLedger::kNobody && peer.worker == ledger.takers[t]) return true;
  }
  return false;
}

bool SwarmTracker::web_seed_allowed(const Hash128& blob, uint64_t first, uint64_t length,
                                    const std::string& worker) {
  std::lock_guard lock(mutex_);
  const std::string blob_hex = blob.hex();
  auto it = pieces_.find(blob_hex);
  if (it == pieces_.end() || it->second.piece_bytes == 0 || length == 0) {
    ++web_seed_ranges_;
    web_seed_bytes_ += length;
    return true;
  }
  PieceLedger& ledger = it->second;
  const size_t from = static_cast<size_t>(first / ledger.piece_bytes);
  const size_t to = std::min(ledger.sent.size(),
                             static_cast<size_t>((first + length - 1) / ledger.piece_bytes) + 1);
  const auto now = Clock::now();
  uint64_t first_copies = 0;  // of this range's pieces that never left the hub
  for (size_t p = from; p < to; ++p) {
    if (ledger.sent[p] > 0) continue;
    const uint64_t begin = p * ledger.piece_bytes;
    first_copies += std::min(ledger.piece_bytes, ledger.blob_bytes - begin);
  }
  // The room of the first copies not yet sent is kept: every piece must leave once, so a second
  // copy may only take what the budget holds beyond them (the budget is then a bound on the
  // bytes out, stuck pieces sent again aside).
  const uint64_t reserved = ledger.unsent_bytes - first_copies;
  const bool over_budget = static_cast<double>(ledger.sent_bytes + length + reserved) >
                           options_.web_seed_budget * static_cast<double>(ledger.blob_bytes);
  uint64_t resent = 0;  // bytes of this range's pieces that go again only because they are stuck
  std::vector<size_t> stuck;
  for (size_t p = from; p < to; ++p) {
    // A piece that left a moment ago goes again only as one of its copies within the budget;
    // one whose copies all left a while ago goes again whatever the budget (it is stuck). How
    // long a while: a piece whose takers all left the swarm needs one more copy soon; one whose
    // taker is still there is being passed on, only slowly (32 workers on two cores; volunteers
    // whose uplinks carry their own traffic), or that taker cannot be reached — a wait of
    // `reseed_after` fed such a swarm every piece again and again (0.4–0.9 blob sizes more at
    // N = 32). The wait doubles each time the piece went again.
    const bool copy_allowed = ledger.sent[p] < options_.web_seed_copies && !over_budget;
    if (ledger.sent[p] == 0 || copy_allowed) continue;
    // The peer list is looked at only when the answer matters: inside one window the piece
    // waits whoever holds it, past the longest wait it goes whoever holds it.
    const auto since = now - ledger.last[p];
    int wait = 1;
    if (since >= options_.reseed_after && since < options_.reseed_after * kMaxReseedWait &&
        held_in_swarm_locked(blob_hex, ledger, p, now))
      wait = kReseedWaitWhileHeld;
    for (int i = 0; i < ledger.resent[p] && wait < kMaxReseedWait; ++i) wait *= 2;
    if (since < options_.reseed_after * std::min(wait, kMaxReseedWait)) {
      ++web_seed_refusals_;
      return false;
    }
    stuck.push_back(p);
    const uint64_t begin = p * ledger.piece_bytes;
    const uint64_t end = std::min(begin + ledger.piece_bytes, ledger.blob_bytes);
    resent += std::min(end, first + length) - std::max(begin, first);
  }
  const uint16_t taker = taker_locked(ledger, worker);
  for (size_t p = from; p < to; ++p) {
    ledger.sent[p] = static_cast<uint8_t>(std::min(255, ledger.sent[p] + 1));
    ledger.last[p] = now;
    auto& took = ledger.took[p];  // the newest first
    std::move_backward(took.begin(), took.end() - 1, took.end());
    took[0] = taker;
  }
  for (const size_t p : stuck)
    ledger.resent[p] = static_cast<uint8_t>(std::min(255, ledger.resent[p] + 1));
  ledger.sent_bytes += length;
  ledger.unsent_bytes -= first_copies;
  ++web_seed_ranges_;
  web_seed_bytes_ += length;
  web_seed_resent_bytes_ += resent;
  return true;
}

void SwarmTracker::web_seed_cut(const Hash128& blob, uint64_t first, uint64_t length,
                                uint64_t delivered, const std::string& worker) {
  std::lock_guard lock(mutex_);
  web_seed_cut_bytes_ += length - std::min(length, delivered);
  auto it = pieces_.find(blob.hex());
  if (it == pieces_.end() || it->second.piece_bytes == 0 || length == 0) return;
  PieceLedger& ledger = it->second;
  // Only the pieces of which no byte was delivered: a worker that reads most of a piece and
  // then closes must not get its copy back, or it could pull the piece from the hub again and
  // again, past any budget.
  const uint64_t cut_from = first + std::min(length, delivered);
  const size_t from = static_cast<size_t>((cut_from + ledger.piece_bytes - 1) / ledger.piece_bytes);
  const size_t to = std::min(ledger.sent.size(),
                             static_cast<size_t>((first + length - 1) / ledger.piece_bytes) + 1);
  for (size_t p = from; p < to; ++p) {
    if (ledger.sent[p] == 0) continue;
    // A copy sent again goes after the ordinary ones, so the one that did not arrive is taken
    // to be the latest: the piece is no slower to pass on than before it.
    if (ledger.resent[p] > 0) --ledger.resent[p];
    // Nor does the worker hold it.
    auto taker = ledger.taker_index.find(worker);
    if (taker != ledger.taker_index.end())
      std::replace(ledger.took[p].begin(), ledger.took[p].end(), taker->second,
                   PieceLedger::kNobody);
    if (--ledger.sent[p] == 0) {
      const uint64_t begin = p * ledger.piece_bytes;
      ledger.unsent_bytes += std::min(ledger.piece_bytes, ledger.blob_bytes - begin);
    }
  }
  ledger.sent_bytes -= std::min(ledger.sent_bytes, length - std::min(length, delivered));
}

void SwarmTracker::expire_locked(Swarm& s, Clock::time_point now) {
  const auto ttl = std::chrono::seconds(3 * options_.interval_s);
  for (auto it = s.peers.begin(); it != s.peers.end();) {
    if (now - it->second.seen > ttl)
      it = s.peers.erase(it);
    else
      ++it;
  }
}

std::string SwarmTracker::announce(const std::string& key, const SwarmAnnounce& a) {
  const std::optional<SwarmKeyHolder> holder = holder_of(key);
  if (!holder) return net::swarm::announce_failure("unknown or refused swarm key");
  if (a.info_hash.size() != 20) return net::swarm::announce_failure("info_hash is not 20 bytes");
  if (a.port == 0) return net::swarm::announce_failure("port 0");
  std::lock_guard lock(mutex_);
  ++announces_;
  auto alias = announce_to_blob_.find(hex_of(a.info_hash));
  if (alias == announce_to_blob_.end())
    return net::swarm::announce_failure("not a torrent of this hub");
  Swarm& swarm = swarms_[alias->second];
  const auto now = Clock::now();
  expire_locked(swarm, now);
  const auto address = std::make_pair(a.ip, a.port);
  if (a.event == "stopped") {
    swarm.peers.erase(address);
  } else {
    if (!swarm.peers.count(address) && swarm.peers.size() >= kMaxPeers) {
      auto stalest = std::min_element(
          swarm.peers.begin(), swarm.peers.end(),
          [](const auto& x, const auto& y) { return x.second.seen < y.second.seen; });
      swarm.peers.erase(stalest);
    }
    swarm.peers[address] = Peer{holder->worker, holder->serves, a.left, now};
  }
  // Up to 50 others that serve, drawn at random so that a thousand workers do not all dial the
  // same few.
  std::vector<net::swarm::PeerAddress> others;
  int complete = 0, incomplete = 0;
  for (const auto& [addr, peer] : swarm.peers) {
    (peer.left == 0 ? complete : incomplete) += 1;
    if (addr != address && peer.worker != holder->worker && peer.serves)
      others.push_back({addr.first, addr.second});
  }
  for (size_t i = others.size(); i > 1; --i) std::swap(others[i - 1], others[shuffle_.next() % i]);
  if (others.size() > 50) others.resize(50);
  return net::swarm::announce_reply(others, options_.interval_s, complete, incomplete);
}

int64_t SwarmTracker::uplink_probe_wait_ms(const std::string& worker) {
  std::lock_guard lock(mutex_);
  const int64_t now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                             std::chrono::steady_clock::now().time_since_epoch())
                             .count();
  return uplink_probes_.acquire(worker, now_ms);
}

SwarmTrackerStats SwarmTracker::stats() const {
  std::lock_guard lock(mutex_);
  SwarmTrackerStats s;
  s.torrents = torrents_.size();
  for (const auto& [hash, swarm] : swarms_) {
    s.peers += swarm.peers.size();
    for (const auto& [addr, peer] : swarm.peers) s.seeds += peer.left == 0;
  }
  s.announces = announces_;
  s.torrents_made = torrents_made_;
  s.web_seed_refusals = web_seed_refusals_;
  s.web_seed_ranges = web_seed_ranges_;
  s.web_seed_bytes = web_seed_bytes_;
  s.web_seed_resent_bytes = web_seed_resent_bytes_;
  s.web_seed_cut_bytes = web_seed_cut_bytes_;
  return s;
}

}  // namespace stoa::hub
