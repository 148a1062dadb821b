// The workers the hub knows as present: each worker's stats (name, join token, where its last
// request came from, its latest heartbeat, the rollouts accepted from it), from its join — or the
// ledger's row at a restart — until it is idle past the expiry; and the run's end, with the
// workers an answer has told of it. Invariants: a worker is listed exactly from joined() (or
// restore()) until forget(); the idle scan runs at most once a second unless rescan_now() asks;
// the run ends once and stays ended. The sessions, the ledger rows and the other parts' view of
// a worker (fair leasing, identity) are the Hub's to change with it. Not thread-safe: the Hub
// calls it under its lock.
#pragma once
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "net/protocol.h"
#include "roles/hub/ledger/ledger.h"
#include "roles/hub/worker_stats.h"

namespace stoa::hub {

class WorkerRoster {
 public:
  using Stats = std::map<std::string, WorkerStats>;  // worker id ->

  // A worker the ledger knows, at a restart: its session was issued a session_ttl_ms before it
  // expires.
  void restore(const WorkerRow& row, int64_t session_ttl_ms);
  // A worker that joined or resumed at `now_ms` from `peer` ("" in-process: address unchanged).
  WorkerStats& joined(const WorkerRow& row, const std::string& peer, int64_t now_ms);
  // A worker's heartbeat at `now_ms`: nullptr for a worker no longer listed (it joins again).
  WorkerStats* heard(const net::Heartbeat& heartbeat, int64_t now_ms);
  void session_issued(const std::string& worker_id, int64_t now_ms);
  // One more rollout accepted from `worker_id` (ignored for a worker not listed).
  void accepted(const std::string& worker_id);

  const WorkerStats* find(const std::string& worker_id) const;
  size_t size() const { return stats_.size(); }
  const Stats& stats() const { return stats_; }
  // Verification notes addresses and reads rollouts accepted (the distinct-checker rule).
  Stats& stats() { return stats_; }

  // Whether the idle scan is due at `now_ms` (at most once a second); marks it done.
  bool scan_due(int64_t now_ms);
  void rescan_now() { scanned_ms_ = 0; }
  // The workers not heard from for more than `idle_ms`.
  std::vector<std::string> idle(int64_t now_ms, int64_t idle_ms) const;
  void forget(const std::string& worker_id) { stats_.erase(worker_id); }

  // The run is over: true the first time.
  bool end_run();
  bool run_ended() const { return run_ended_; }
  void told_run_ended(const std::string& worker_id) { told_run_ended_.insert(worker_id); }
  // The workers heard from within `recent_ms` of `now_ms` that no answer told of the end.
  size_t not_told_of_end(int64_t now_ms, int64_t recent_ms) const;

 private:
  Stats stats_;
  int64_t scanned_ms_ = 0;
  bool run_ended_ = false;
  std::set<std::string> told_run_ended_;
};

}  // namespace stoa::hub
