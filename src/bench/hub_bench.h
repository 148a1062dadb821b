// `stoa bench hub`: N simulated workers speaking the real protocol (join, version long-poll,
// lease, heartbeat, rollouts) against a real hub (the real Hub, ledger and HTTP server) on
// loopback, optionally with M slow-header connections that send one header byte every 5 s.
// A fake trainer consumes complete groups and publishes a version every few seconds (waking
// every parked long-poll). Reports p50/p99 per endpoint, intake rollouts/s, the hub's CPU
// seconds (its HTTP threads), peak RSS and the load average. With hoarders: the honest workers'
// throughput alone and among the hoarders (fair leasing, docs/design/hub.md). With
// hoarder_address_counts, the hoarding scenario at the hub's defaults from real, non-loopback
// addresses (hub_bench_defaults.cpp).
#pragma once
#include <string>
#include <vector>

namespace stoa::bench {

struct HubBenchOptions {
  int workers = 100;
  int slow_clients = 0;
  double seconds = 30;            // the measured phase, after every worker joined
  double ramp_seconds = 5;        // workers join spread over this
  double think_seconds = 30;      // a lease's simulated generation time (G samples)
  double heartbeat_seconds = 10;  // heartbeats while generating
  double publish_seconds = 5;     // the fake trainer publishes a version this often
  int handler_threads = 16;       // the hub's request handlers (ServerOptions::threads)
  // Issue 32's measure: with hoarders > 0 the bench runs twice on fresh hubs, the workers alone
  // and with this many Sybils that lease all they can, heartbeat and never submit, and reports
  // the honest workers' throughput in both. The hub revokes a lease with no rollout after
  // hoard_deadline_seconds (HubConfig::hoard_min_tokens_per_s set to match).
  int hoarders = 0;
  double hoard_deadline_seconds = 10;
  double warmup_seconds = -1;  // before the measured phase; default think_seconds + 1
  // Issue 51's measure: every hub setting at its default, the hoarders on each of these many
  // distinct non-loopback addresses in turn (a namespace of the bench's own; needs root), one
  // run alone first; slow honest workers at 1/slow_factor of the speed join the crowded runs.
  std::vector<int> hoarder_address_counts;
  int slow_workers = 1;
  double slow_factor = 10;
  std::string workdir;  // ledger + blobs (default: a temp dir, removed)
  bool json = false;
};

// Prints the report (JSON with the json option); returns the exit status.
int run_hub_bench(const HubBenchOptions& options);
int run_hub_bench_at_defaults(const HubBenchOptions& options);  // hoarder_address_counts set

}  // namespace stoa::bench
