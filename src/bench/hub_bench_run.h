// One run of `stoa bench hub` on a fresh hub (hub_bench.cpp), shared by the bench's modes: the
// loopback benches (hub_bench.cpp) and the hoarding scenario at the hub's defaults from real
// addresses (hub_bench_defaults.cpp).
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/hub_bench.h"

namespace stoa::bench {

struct HubRun {
  int hoarders = 0;
  // Every HubConfig and ServerOptions setting at its default (but the ledger's path and the
  // join token, which have none); otherwise the bench's transport settings (hub_bench.cpp).
  bool hub_defaults = false;
  int slow_workers = 0;  // honest workers at a 1/slow_factor of the others' speed
  std::string hub_host = "127.0.0.1";
  std::vector<std::string> worker_addresses, hoarder_addresses;  // empty: 127.0.0.x
};

// Runs the fleet of `options` (with `run`'s hoarders and addresses) against a fresh hub and
// returns the report; the caller's thread decides the network namespace everything is in.
nlohmann::json run_hub_once(const HubBenchOptions& options, const HubRun& run);

// Raises the soft descriptor limit to the hard one (two connections per worker at both ends).
void raise_fd_limit();

}  // namespace stoa::bench
