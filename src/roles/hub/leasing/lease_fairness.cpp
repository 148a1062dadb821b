#include "roles/hub/leasing/lease_fairness.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cstdio>

#include "core/enum_names.h"
#include "core/error.h"
#include "roles/hub/hub.h"  // is_loopback_host

namespace stoa::hub {

constexpr EnumName<Standing> kStandingNames[] = {
    {Standing::kProven, "proven"}, {Standing::kNew, "new"}, {Standing::kHoarder, "hoarder"}};

const char* standing_name(Standing standing) {
  return enum_name(kStandingNames, standing);
}

std::string address_key(const std::string& peer) {
  if (peer.empty() || is_loopback_host(peer)) return "";
  unsigned char bytes[16];
  if (peer.find(':') != std::string::npos && inet_pton(AF_INET6, peer.c_str(), bytes) == 1) {
    char prefix[48];
    std::snprintf(prefix, sizeof(prefix), "%02x%02x:%02x%02x:%02x%02x:%02x%02x::/64", bytes[0],
                  bytes[1], bytes[2], bytes[3], bytes[4], bytes[5], bytes[6], bytes[7]);
    return prefix;
  }
  return peer;
}

// ---------------------------------------------------------------- workers

void LeaseFairness::set_token(const std::string& worker, const std::string& token_name) {
  workers_[worker].token = token_name;
}

void LeaseFairness::proven(const std::string& worker) {
  auto& w = workers_[worker];
  w.proven = true;
  w.hoarder = false;
}

void LeaseFairness::hoarded(const std::string& worker) {
  workers_[worker].hoarder = true;
}

Standing LeaseFairness::standing(const std::string& worker) const {
  auto it = workers_.find(worker);
  if (it == workers_.end()) return Standing::kNew;
  if (it->second.hoarder) return Standing::kHoarder;
  return it->second.proven ? Standing::kProven : Standing::kNew;
}

void LeaseFairness::forget(const std::string& worker) {
  workers_.erase(worker);
  waiters_.erase(worker);
}

size_t LeaseFairness::hoarders() const {
  return static_cast<size_t>(std::count_if(workers_.begin(), workers_.end(),
                                           [](const auto& w) { return w.second.hoarder; }));
}

// ---------------------------------------------------------------- open leases

void LeaseFairness::count(const OpenLease& l, int delta) {
  auto bump = [delta](std::map<std::string, size_t>& m, const std::string& key) {
    if (key.empty()) return;
    size_t& n = m[key];
    n = delta > 0 ? n + 1 : (n > 0 ? n - 1 : 0);
    if (n == 0) m.erase(key);
  };
  bump(by_address_, l.address);
  bump(by_token_, l.token);
}

void LeaseFairness::opened(const std::string& lease, const std::string& worker,
                           const std::string& peer, int64_t now_ms) {
  if (open_.count(lease)) return;
  auto wit = workers_.find(worker);
  OpenLease l{worker, address_key(peer), wit == workers_.end() ? "" : wit->second.token, now_ms, 0};
  count(l, +1);
  by_worker_[worker].insert(lease);
  open_.emplace(lease, std::move(l));
}

void LeaseFairness::closed(const std::string& lease) {
  auto it = open_.find(lease);
  if (it == open_.end()) return;
  if (counts(it->second)) count(it->second, -1);
  auto bw = by_worker_.find(it->second.worker);
  if (bw != by_worker_.end()) {
    bw->second.erase(lease);
    if (bw->second.empty()) by_worker_.erase(bw);
  }
  open_.erase(it);
}

void LeaseFairness::progressed(const std::string& lease, int64_t now_ms) {
  auto it = open_.find(lease);
  if (it != open_.end()) it->second.progress_ms = std::max(it->second.progress_ms, now_ms);
}

std::vector<std::string> LeaseFairness::overdue(int64_t now_ms, int64_t deadline_ms) const {
  std::vector<std::string> out;
  if (deadline_ms <= 0) return out;
  for (const auto& [id, l] : open_)
    if (now_ms - l.progress_ms > deadline_ms) out.push_back(id);
  return out;
}

void LeaseFairness::heartbeat(const std::string& worker, const std::vector<std::string>& listed) {
  auto bw = by_worker_.find(worker);
  if (bw == by_worker_.end()) return;
  const std::set<std::string> in_heartbeat(listed.begin(), listed.end());
  for (const auto& id : bw->second) {
    OpenLease& l = open_.at(id);
    if (in_heartbeat.count(id)) {
      if (!counts(l)) count(l, +1);
      l.unlisted = 0;
      continue;
    }
    const bool counted = counts(l);
    l.unlisted = std::min(l.unlisted + 1, 2);
    if (counted && !counts(l)) count(l, -1);
  }
}

size_t LeaseFairness::held(const std::string& worker) const {
  auto bw = by_worker_.find(worker);
  if (bw == by_worker_.end()) return 0;
  return static_cast<size_t>(std::count_if(bw->second.begin(), bw->second.end(),
                                           [&](const auto& id) { return counts(open_.at(id)); }));
}

size_t LeaseFairness::cap_of(const std::string& worker) const {
  // A hoarder holds one lease at most: enough to prove itself with an accepted rollout.
  if (standing(worker) == Standing::kHoarder) return 1;
  return caps_.per_worker;
}

std::optional<std::string> LeaseFairness::over_cap(const std::string& worker,
                                                   const std::string& peer) const {
  if (const size_t cap = cap_of(worker); cap > 0 && held(worker) >= cap)
    return cat("this worker holds ", held(worker), " open leases (cap ", cap,
               standing(worker) == Standing::kHoarder ? ", a worker whose lease was revoked" : "",
               ")");
  const std::string address = address_key(peer);
  if (caps_.per_address > 0 && !address.empty()) {
    auto it = by_address_.find(address);
    if (it != by_address_.end() && it->second >= caps_.per_address)
      return cat("address ", address, " holds ", it->second, " open leases (cap ",
                 caps_.per_address, ")");
  }
  auto wit = workers_.find(worker);
  if (caps_.per_token > 0 && wit != workers_.end() && !wit->second.token.empty()) {
    auto it = by_token_.find(wit->second.token);
    if (it != by_token_.end() && it->second >= caps_.per_token)
      return cat("join token '", wit->second.token, "' holds ", it->second, " open leases (cap ",
                 caps_.per_token, ")");
  }
  return std::nullopt;
}

// ---------------------------------------------------------------- the waiting order

void LeaseFairness::waiting(const std::string& worker, const std::string& peer, int64_t now_ms,
                            int64_t ttl_ms) {
  auto [it, fresh] = waiters_.try_emplace(worker, Waiter{next_order_++, 0, peer});
  it->second.until_ms = now_ms + ttl_ms;
  it->second.peer = peer;
}

std::tuple<int, size_t, uint64_t> LeaseFairness::rank(const std::string& worker,
                                                      uint64_t order) const {
  // Proven and new workers rank alike: a new worker that had to wait behind proven ones could
  // never prove itself.
  return {standing(worker) == Standing::kHoarder ? 1 : 0, held(worker), order};
}

size_t LeaseFairness::ahead_of(const std::string& worker, int64_t now_ms) {
  std::erase_if(waiters_, [&](const auto& w) { return w.second.until_ms < now_ms; });
  auto self = waiters_.find(worker);
  // A worker that did not wait asks after every worker that does.
  const auto mine = rank(worker, self == waiters_.end() ? next_order_ : self->second.order);
  size_t ahead = 0;
  for (const auto& [id, w] : waiters_) {
    if (id == worker || rank(id, w.order) >= mine) continue;
    if (!over_cap(id, w.peer)) ++ahead;
  }
  return ahead;
}

std::optional<std::string> LeaseFairness::preemptable(const std::string& worker) const {
  std::optional<std::string> oldest;
  int64_t oldest_ms = 0;
  for (const auto& [id, l] : open_) {
    if (l.worker == worker || standing(l.worker) != Standing::kHoarder) continue;
    if (!oldest || l.progress_ms < oldest_ms) {
      oldest = id;
      oldest_ms = l.progress_ms;
    }
  }
  return oldest;
}

}  // namespace stoa::hub
