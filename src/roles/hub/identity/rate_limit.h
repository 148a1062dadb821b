// Token buckets keyed by a string (a worker id, a peer address, a worker and a blob): each key's
// bucket holds up to its capacity and earns `per_second` back; a refused take learns how long
// until it would fit (the 429's Retry-After). Buckets are forgotten when the table is full —
// first those full again (forgetting one changes nothing), then the half touched longest ago
// (that only ever grants those keys a fresh bucket early, never refuses anyone) — so a flood of
// distinct keys cannot grow the table without bound. Not thread-safe: the owner's lock.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <unordered_map>

namespace stoa::hub {

class TokenBuckets {
 public:
  struct Shape {
    double capacity = 1;    // what a new (or forgotten) bucket holds
    double per_second = 0;  // what it earns back; > 0
  };
  explicit TokenBuckets(size_t max_keys) : max_keys_(max_keys) {}

  // Takes `amount` from `key`'s bucket (made full with `shape` on first use). 0 when taken,
  // else the seconds until the bucket would hold the amount (a whole bucket for an amount larger
  // than it): nothing is taken then.
  double take(const std::string& key, double amount, Shape shape, int64_t now_ms);
  // Gives back up to the bucket's capacity (a forgotten bucket was full: nothing to do).
  void give_back(const std::string& key, double amount);
  void forget(const std::string& key) { buckets_.erase(key); }
  size_t size() const { return buckets_.size(); }
  // How many buckets not yet full were forgotten to make room (a sign of a flood).
  uint64_t forgotten_early() const { return forgotten_early_; }

 private:
  struct Bucket {
    double tokens = 0;
    Shape shape;
    int64_t touched_ms = 0;
  };
  static void refill(Bucket& bucket, int64_t now_ms);
  void make_room(int64_t now_ms);

  size_t max_keys_;
  std::unordered_map<std::string, Bucket> buckets_;
  uint64_t forgotten_early_ = 0;
};

struct RateLimit {
  double rate_per_s = 0;  // <= 0: unlimited
  double burst = 1;
};

// One limit for every key, one token a request.
class RateLimiter {
 public:
  explicit RateLimiter(RateLimit limit = {}, size_t max_keys = 100'000)
      : limit_(limit), buckets_(max_keys) {}

  // 0 when `key` may proceed (a token is spent), else the milliseconds until it may (>= 1).
  int64_t acquire(const std::string& key, int64_t now_ms);
  void forget(const std::string& key) { buckets_.forget(key); }
  size_t size() const { return buckets_.size(); }

 private:
  RateLimit limit_;
  TokenBuckets buckets_;
};

}  // namespace stoa::hub
