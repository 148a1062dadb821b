// How much of each blob the hub sends each worker: any joined worker may GET any blob (PULSE
// anchors and patches, the run's model files, the swarm's web seed), so without a bound one
// stranger fetching an 8 GB anchor in a loop takes the hub's uplink from the whole fleet. Each
// (worker, blob) has a bucket of `fetches` times the blob's size (at least `min_bytes`),
// refilled at one blob size per `refill`: an honest worker takes a blob once, again after a
// refused copy or a lost spool, and once more each time it restarts days later. A reply takes
// its range's bytes when it starts and gives back what it did not send when it is cut short, so
// a worker on a link that drops every few MB resumes without spending its allowance twice.
//
// Bounded memory: at most `max_entries` buckets (identity/rate_limit.h's TokenBuckets: full
// buckets carry nothing and are forgotten first, then the ones touched longest ago).
#pragma once
#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>

#include "core/hash.h"
#include "roles/hub/identity/rate_limit.h"

namespace stoa::hub {

struct FetchAllowanceOptions {
  double fetches = 4;  // blob sizes a worker may take of one blob at once; 0: no bound
  std::chrono::seconds refill{3600};  // one blob size back per this long
  uint64_t min_bytes = 1u << 20;      // a tiny blob's bucket is never smaller
  size_t max_entries = 1u << 16;
};

struct FetchAllowanceStats {
  uint64_t refusals = 0;       // replies refused: the bucket was short
  uint64_t refused_bytes = 0;  // the bytes those replies asked for
  uint64_t buckets = 0;        // (worker, blob) pairs remembered
};

class FetchAllowance {
 public:
  using Clock = std::chrono::steady_clock;
  explicit FetchAllowance(FetchAllowanceOptions options)
      : options_(options), buckets_(options.max_entries) {}

  // Takes `bytes` of blob `blob` (`blob_bytes` long) from `worker`'s bucket. When the bucket
  // holds less, nothing is taken and the answer is how long until it would hold enough (the
  // Retry-After); zero when taken.
  std::chrono::seconds take(const std::string& worker, const Hash128& blob, uint64_t blob_bytes,
                            uint64_t bytes, Clock::time_point now = Clock::now());
  // Gives back what a reply did not send.
  void give_back(const std::string& worker, const Hash128& blob, uint64_t bytes);
  FetchAllowanceStats stats() const;

 private:
  const FetchAllowanceOptions options_;
  mutable std::mutex mutex_;
  TokenBuckets buckets_;  // in bytes, keyed by worker and blob
  uint64_t refusals_ = 0, refused_bytes_ = 0;
};

}  // namespace stoa::hub
