// Fair leasing (docs/design/hub.md "Fair leasing"): who may take the next group when groups are
// scarce. Three rules keep one worker, or many Sybils, from starving the rest:
//   1. Caps on the open leases one worker, one address and one join token hold.
//   2. A waiting order: a worker that asked and got "no work now" has a claim on the next free
//      group; the claims rank hoarders last, then by fewer leases held, then by who asked
//      first. A worker that just got a lease holds one more than a peer that waits with none,
//      so the next group goes to the peer: round-robin without a long-poll.
//   3. Standing: a worker that had a lease revoked for hoarding (lease_revocation.cpp: no
//      accepted rollout on it within the hoarding deadline) is a hoarder until one of its
//      rollouts is accepted. A hoarder holds at most one lease, waits behind everyone, and a
//      worker that is no hoarder and finds no free group preempts the hoarder's oldest lease.
// The state is in memory only: a restarted hub counts every restored worker as new (or proven,
// with accepted rollouts) and rebuilds the lease counts from the ledger's open leases.
// Not thread-safe: the Hub calls it under its mutex.
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

namespace stoa::hub {

// [hub] max_leases_per_worker / _per_address / _per_token; 0: no cap.
struct LeaseCaps {
  // A worker leases a group when a slot frees and no held group has samples left to start
  // (roles/worker/rollout_loop.cpp fill_slots), so it holds ceil(slots / G) groups generating
  // plus one whose last samples finish while the next starts. 4 covers `stoa work` up to
  // 3 × G slots (12 at the default G = 4, 24 at the demo's G = 8) with no wait; a bigger worker
  // waits a retry interval for its 5th group. With the default max_open_groups = 16, one worker
  // holds at most a quarter of the run's groups.
  size_t per_worker = 4;
  // Several workers behind one NAT share an address, so twice a worker's cap. Loopback peers
  // (the operator's own machine: the demo, local workers) are not capped by address, and IPv6
  // addresses count by /64 (one host's usual allocation).
  size_t per_address = 8;
  // Off: the default token is public in an open run, so a cap on it would cap every stranger
  // together. An operator who hands named tokens to parties (`stoa hub token add`) sets it.
  size_t per_token = 0;
};

enum class Standing { kProven, kNew, kHoarder };
const char* standing_name(Standing standing);

// The key the per-address cap counts under: "" (not capped) for an in-process caller or a
// loopback peer, the /64 prefix for IPv6, the address itself otherwise.
std::string address_key(const std::string& peer);

class LeaseFairness {
 public:
  explicit LeaseFairness(LeaseCaps caps) : caps_(caps) {}

  // ---- workers ----
  void set_token(const std::string& worker, const std::string& token_name);
  void proven(const std::string& worker);   // one of its rollouts was accepted
  void hoarded(const std::string& worker);  // one of its leases was revoked for hoarding
  Standing standing(const std::string& worker) const;
  void forget(const std::string& worker);  // expired

  // ---- open leases ----
  void opened(const std::string& lease, const std::string& worker, const std::string& peer,
              int64_t now_ms);
  void closed(const std::string& lease);
  void progressed(const std::string& lease, int64_t now_ms);  // a rollout accepted on it
  // Open leases with no progress (issue or accepted rollout) for longer than `deadline_ms`.
  std::vector<std::string> overdue(int64_t now_ms, int64_t deadline_ms) const;
  // The worker's heartbeat lists the leases it still works on. An open lease it left out of two
  // heartbeats in a row (the first may have been built before the lease's answer arrived) is
  // one it forgot — all its rollouts ended, some refused — and no longer counts against its
  // caps (it stays open until its deadline, so late results still count).
  void heartbeat(const std::string& worker, const std::vector<std::string>& listed);
  size_t held(const std::string& worker) const;  // open leases that count against the caps

  // Why `worker` (asking from `peer`) may not take another lease now, or nullopt.
  std::optional<std::string> over_cap(const std::string& worker, const std::string& peer) const;

  // ---- the waiting order ----
  // `worker` asked and got no group; its claim lives until `now_ms + ttl_ms`.
  void waiting(const std::string& worker, const std::string& peer, int64_t now_ms, int64_t ttl_ms);
  void served(const std::string& worker) { waiters_.erase(worker); }
  // Workers with a live claim that rank before `worker` and have room under their caps.
  size_t ahead_of(const std::string& worker, int64_t now_ms);
  // The oldest open lease of a hoarder other than `worker`: what a better-standing worker that
  // finds no free group takes over. nullopt when there is none.
  std::optional<std::string> preemptable(const std::string& worker) const;

  size_t waiters() const { return waiters_.size(); }
  size_t hoarders() const;

 private:
  struct OpenLease {
    std::string worker;
    std::string address;  // address_key of the peer it was leased from
    std::string token;    // the join token its worker joined with
    int64_t progress_ms = 0;
    int unlisted = 0;  // heartbeats in a row that left it out
  };
  struct WorkerState {
    std::string token;
    bool proven = false;
    bool hoarder = false;
  };
  struct Waiter {
    uint64_t order = 0;  // when it first asked (a sequence number: ties on the clock are common)
    int64_t until_ms = 0;
    std::string peer;
  };
  bool counts(const OpenLease& l) const { return l.unlisted < 2; }
  size_t cap_of(const std::string& worker) const;
  // (hoarder, leases held, when it first asked): smaller is served first.
  std::tuple<int, size_t, uint64_t> rank(const std::string& worker, uint64_t order) const;
  // Adds `delta` to the address and token counts of a lease that counts.
  void count(const OpenLease& l, int delta);

  LeaseCaps caps_;
  std::map<std::string, WorkerState> workers_;
  std::map<std::string, OpenLease> open_;                   // lease id -> holder
  std::map<std::string, std::set<std::string>> by_worker_;  // worker -> its open lease ids
  std::map<std::string, size_t> by_address_;                // address key -> open leases that count
  std::map<std::string, size_t> by_token_;  // join token name -> open leases that count
  std::map<std::string, Waiter> waiters_;
  uint64_t next_order_ = 0;
};

}  // namespace stoa::hub
