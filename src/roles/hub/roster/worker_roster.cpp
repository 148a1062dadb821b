#include "roles/hub/roster/worker_roster.h"

namespace stoa::hub {

void WorkerRoster::restore(const WorkerRow& row, int64_t session_ttl_ms) {
  WorkerStats s;
  s.id = row.id;
  s.name = row.name;
  s.last_seen_ms = row.last_seen_ms;
  s.session_issued_ms = row.session_expires_ms - session_ttl_ms;
  s.token_name = row.token_name;
  stats_[row.id] = s;
}

WorkerStats& WorkerRoster::joined(const WorkerRow& row, const std::string& peer, int64_t now_ms) {
  WorkerStats& w = stats_[row.id];
  w.id = row.id;
  w.name = row.name;
  w.token_name = row.token_name;
  if (!peer.empty()) w.address = peer;
  w.last_seen_ms = now_ms;
  w.session_issued_ms = now_ms;
  return w;
}

WorkerStats* WorkerRoster::heard(const net::Heartbeat& hb, int64_t now_ms) {
  auto it = stats_.find(hb.worker_id);
  if (it == stats_.end()) return nullptr;
  WorkerStats& w = it->second;
  w.last_seen_ms = now_ms;
  w.version = hb.version;
  w.tokens_generated = hb.tokens_generated;
  w.tokens_per_s = hb.tokens_per_s;
  w.idle_fraction = hb.idle_fraction;
  w.download = hb.download;
  w.swarm = hb.swarm;
  return &w;
}

void WorkerRoster::session_issued(const std::string& worker_id, int64_t now_ms) {
  stats_[worker_id].session_issued_ms = now_ms;
}

void WorkerRoster::accepted(const std::string& worker_id) {
  if (auto it = stats_.find(worker_id); it != stats_.end()) it->second.rollouts_accepted++;
}

const WorkerStats* WorkerRoster::find(const std::string& worker_id) const {
  auto it = stats_.find(worker_id);
  return it == stats_.end() ? nullptr : &it->second;
}

bool WorkerRoster::scan_due(int64_t now_ms) {
  if (now_ms - scanned_ms_ < 1000) return false;  // a scan per second is plenty
  scanned_ms_ = now_ms;
  return true;
}

std::vector<std::string> WorkerRoster::idle(int64_t now_ms, int64_t idle_ms) const {
  std::vector<std::string> gone;
  for (const auto& [id, w] : stats_)
    if (now_ms - w.last_seen_ms > idle_ms) gone.push_back(id);
  return gone;
}

bool WorkerRoster::end_run() {
  if (run_ended_) return false;
  run_ended_ = true;
  return true;
}

size_t WorkerRoster::not_told_of_end(int64_t now_ms, int64_t recent_ms) const {
  size_t waiting = 0;
  for (const auto& [id, w] : stats_)
    if (now_ms - w.last_seen_ms <= recent_ms && !told_run_ended_.count(id)) ++waiting;
  return waiting;
}

}  // namespace stoa::hub
