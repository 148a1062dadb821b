// The simulated fleet of `stoa bench hub` (hub_bench.h): every worker is a coroutine on one
// client I/O thread with two keep-alive connections (one long-polls /v1/version, the other
// joins, leases, heartbeats and submits), from its own 127.0.0.x source address as workers on
// the internet come from their own. Plus a /v1/status poller (the dashboard) and optional
// slow-header connections, and optional hoarders. Latencies are recorded per endpoint while
// `measuring` is on.
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
};

struct FleetResults {
  std::map<std::string, std::vector<double>> latency_ms;  // per endpoint, measured phase only
  uint64_t rollouts_accepted = 0;                         // measured phase
  uint64_t errors = 0;                                    // transport errors and 5xx
  std::map<int, uint64_t> statuses;                       // every answer, by HTTP status
  uint64_t slow_dropped = 0;                              // slow connections the hub cut
  uint64_t joined = 0;
  uint64_t hoarder_leases = 0;     // leases the hoarders got (whole run)
  uint64_t hoarder_cancelled = 0;  // of them, cancelled by the hub (revoked, preempted)
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
