// `stoa bench swarm`: how long a new version takes to reach every worker, and what it costs the
// hub's uplink, with workers serving each other (the swarm, net/swarm/swarm.h) and without (each
// worker downloads from the hub). On emulated links (swarm_links.h): a capped hub uplink and N
// home links, each worker a real `stoa work --sync-only` process in a namespace of its own. For
// each N and each mode, a fresh hub publishes an anchor (the fresh-anchor case: every worker
// joined, none holds anything) and then a patch; the bench times each worker's "holding version"
// line from the publish, and reads the hub's bytes out from its link's counters. With `netem`
// the links are the link emulator's (delay, jitter, loss, NAT) and the hub serves from its
// namespace there.
//
// The blobs are a synthetic int8 state (random values: zstd cannot shrink them) and a patch of
// it changing as many values as make the asked-for patch size; what is timed is the path a
// real version takes (hub, torrent, tracker, web seed, peers, the worker's verify and apply).
#pragma once
#include <string>
#include <vector>

#include "bench/swarm_links.h"

namespace stoa::bench {

struct SwarmBenchOptions {
  std::vector<int> workers = {1, 4, 8, 16, 32};
  std::vector<std::string> modes = {"peers", "hub"};  // peers: --swarm on; hub: --swarm off
  double anchor_mb = 32;
  double patch_mb = 16;
  SwarmLinkRates rates;
  std::string workdir;  // default ./.stoa-bench-swarm-<random>
  bool keep = false;
  double timeout_s = 900;  // per phase
  // The workers' --upload: "0" (no cap of their own: the link's tbf is the cap), a KiB/s
  // figure, or "auto" (their default: a share of the uplink each measures against the hub).
  std::string upload = "0";
  int web_seed_copies = 2;       // the hub's [hub] swarm_web_seed_copies
  double web_seed_budget = 1.5;  // the hub's [hub] swarm_web_seed_budget
  int reseed_after_s = 5;        // the hub's [hub] swarm_reseed_after_s
  bool json = false;
  // Through the link emulator (net/netem, docs/design/netem.md) instead of tbf on a bridge: the
  // same rates plus each worker's RTT to the core, jitter and loss each way, and a NAT for the
  // fraction `natted` of the workers (spread evenly over them).
  bool netem = false;
  double rtt_ms = 0, jitter_ms = 0, loss = 0;
  double natted = 0;
  std::string nat = "port-restricted";
};

int run_swarm_bench(const SwarmBenchOptions& options);

}  // namespace stoa::bench
