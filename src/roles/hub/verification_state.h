// Private to the Hub's .cpp files: the state behind replay verification (verification.cpp).
#pragma once
#include <cstdint>
#include <map>
#include <set>
#include <string>

#include "core/rng.h"
#include "roles/hub/hub.h"

namespace stoa::hub {

struct Hub::Verification {
  RolloutAuditor* auditor = nullptr;
  Rng sampler;  // which rollouts are replayed: unpredictable to workers
  struct Pending {
    std::string group_id;
    std::string worker_id;
    int64_t deadline_ms = 0;
  };
  std::map<std::string, Pending> pending;                // rollout id -> what waits on it
  std::map<std::string, std::set<uint64_t>> seeds_used;  // lease id -> seeds accepted
  std::set<std::string> quarantined;                     // worker ids (also in the ledger)
  // Seeds used on leases issued before this hub started are read back from the ledger's
  // rollouts the first time such a lease is seen (a restart must not reopen them).
  int64_t started_ms = 0;
  std::set<std::string> seeds_restored;  // lease ids
  int64_t passed = 0;
  int64_t failed = 0;
  int64_t skipped_queue_full = 0;
  int64_t timeouts = 0;
  double cpu_seconds = 0;  // validation CPU time over every verdict
  explicit Verification(RolloutAuditor* a, uint64_t seed) : auditor(a), sampler(seed, 0x5e1f) {}
};

}  // namespace stoa::hub
