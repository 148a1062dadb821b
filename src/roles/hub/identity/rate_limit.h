// Token buckets keyed by a string (a worker id, a peer address): each key may spend `burst`
// requests at once and earns `rate_per_s` back. A refused request learns how long until its next
// token (the 429's Retry-After). Buckets idle long enough to be full again are forgotten, so a
// flood of distinct keys cannot grow the table without bound. Not thread-safe (the Hub's mutex).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <unordered_map>

namespace stoa::hub {

struct RateLimit {
  double rate_per_s = 0;  // <= 0: unlimited
  double burst = 1;
};

class RateLimiter {
 public:
  explicit RateLimiter(RateLimit limit = {}, size_t max_keys = 100'000)
      : limit_(limit), max_keys_(max_keys) {}

  // 0 when `key` may proceed (a token is spent), else the milliseconds until it may (>= 1).
  int64_t acquire(const std::string& key, int64_t now_ms);
  void forget(const std::string& key) { buckets_.erase(key); }
  size_t size() const { return buckets_.size(); }

 private:
  struct Bucket {
    double tokens = 0;
    int64_t updated_ms = 0;
  };
  void prune(int64_t now_ms);

  RateLimit limit_;
  size_t max_keys_;
  std::unordered_map<std::string, Bucket> buckets_;
};

}  // namespace stoa::hub
