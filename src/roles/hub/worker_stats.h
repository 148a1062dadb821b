// What the hub knows of one joined worker: who it is, what it last reported, what it holds.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "net/protocol.h"

namespace stoa::hub {

struct WorkerStats {
  std::string id;
  std::string name;
  int64_t last_seen_ms = 0;
  std::string token_name;  // the join token it joined with
  std::optional<uint64_t> version;
  uint64_t tokens_generated = 0;
  double tokens_per_s = 0;
  double idle_fraction = 0;
  int64_t rollouts_accepted = 0;
  int64_t session_issued_ms = 0;              // the newest session token's issue time (rotation)
  std::optional<net::BlobDownload> download;  // the worker's blob download in progress
  std::optional<net::SwarmServing> swarm;     // what it serves to other workers
  // Filled by status(): open leases counting against its caps, and its standing
  // (lease_fairness.h: proven, new, hoarder).
  size_t leases_held = 0;
  std::string standing;
  std::string address;  // where its last request came from ("" in-process): peer checks
};

}  // namespace stoa::hub
