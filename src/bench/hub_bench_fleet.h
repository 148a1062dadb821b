// The simulated fleet of `stoa bench hub` (hub_bench.h): every worker is a coroutine on one
// client I/O thread with two keep-alive connections (one long-polls /v1/version, the other
// joins, leases, heartbeats and submits), from its own 127.0.0.x source address as workers on
// the internet come from their own, or from the addresses given (non-loopback ones inside a
// namespace of the bench's own: hub_bench_defaults.cpp). Plus a /v1/status poller (the dashboard)
// and optional slow-header connections, and optional hoarders. Latencies are recorded per endpoint
// while `measuring` is on.
#pragma once
#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace stoa::bench {

struct FleetOptions {
  int port = 0;
  int workers = 100;
  int slow_clients = 0;
  std::string join_token;
  double ramp_seconds = 5;
  double think_seconds = 30;
  double heartbeat_seconds = 10;
  // Sybils (issue 32): each joins, leases all the hub gives it as fast as it may, heartbeats
  // every lease it holds and never submits. They join first; the honest workers after the ramp.
  int hoarders = 0;
  // Where the hub listens and the source addresses to bind: empty, 127.0.0.x per worker (which
  // the hub's per-address cap exempts as loopback). Honest worker i binds
  // worker_addresses[i % size], hoarder i hoarder_addresses[i % size].
  std::string hub_host = "127.0.0.1";
  std::vector<std::string> worker_addresses, hoarder_addresses;
  // Honest workers that take slow_factor × think_seconds per lease (from worker_addresses after
  // the `workers` ones); they join with the others and are counted apart, over the whole run.
  int slow_workers = 0;
  double slow_factor = 10;
};

struct FleetResults {
  std::map<std::string, std::vector<double>> latency_ms;  // per endpoint, measured phase only
  uint64_t rollouts_accepted = 0;                         // measured phase
  uint64_t errors = 0;                                    // transport errors and 5xx
  std::map<int, uint64_t> statuses;                       // every answer, by HTTP status
  uint64_t slow_dropped = 0;                              // slow connections the hub cut
  uint64_t joined = 0;
  uint64_t hoarder_leases = 0;          // leases the hoarders got (whole run)
  uint64_t hoarder_cancelled = 0;       // of them, cancelled by the hub (revoked, preempted)
  uint64_t honest_cancelled = 0;        // the honest workers' leases the hub cancelled
  uint64_t slow_rollouts_accepted = 0;  // the slow workers', whole run
  uint64_t slow_leases = 0;
  uint64_t slow_cancelled = 0;        // of them, cancelled by the hub (revoked, preempted)
  std::vector<std::string> slow_ids;  // the hub's ids of the slow workers
};

class SimulatedFleet {
 public:
  explicit SimulatedFleet(FleetOptions options);
  ~SimulatedFleet();  // stops
  SimulatedFleet(const SimulatedFleet&) = delete;
  SimulatedFleet& operator=(const SimulatedFleet&) = delete;

  void start();
  uint64_t joined() const { return joined_; }
  void measure(bool on) { measuring_ = on; }
  // Tells the fleet when a version was published (the wake-up latency of parked long-polls).
  void published(uint64_t version);
  void stop();
  FleetResults results();  // after stop()

  struct Impl;

 private:
  FleetOptions options_;
  std::atomic<uint64_t> joined_{0};
  std::atomic<bool> measuring_{false};
  Impl* impl_ = nullptr;
};

}  // namespace stoa::bench
