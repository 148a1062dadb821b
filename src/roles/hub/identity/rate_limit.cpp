#include "roles/hub/identity/rate_limit.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace stoa::hub {

int64_t RateLimiter::acquire(const std::string& key, int64_t now_ms) {
  if (limit_.rate_per_s <= 0) return 0;
  const double burst = std::max(1.0, limit_.burst);
  auto it = buckets_.find(key);
  if (it == buckets_.end()) {
    if (buckets_.size() >= max_keys_) prune(now_ms);
    it = buckets_.emplace(key, Bucket{burst, now_ms}).first;
  }
  Bucket& b = it->second;
  const double earned =
      static_cast<double>(std::max<int64_t>(0, now_ms - b.updated_ms)) / 1000.0 * limit_.rate_per_s;
  b.tokens = std::min(burst, b.tokens + earned);
  b.updated_ms = now_ms;
  if (b.tokens >= 1.0) {
    b.tokens -= 1.0;
    return 0;
  }
  const double wait_ms = (1.0 - b.tokens) / limit_.rate_per_s * 1000.0;
  return std::max<int64_t>(1, static_cast<int64_t>(std::ceil(wait_ms)));
}

void RateLimiter::prune(int64_t now_ms) {
  // A bucket untouched for as long as a refill from empty takes is full again: the same as new.
  const auto refill_ms =
      static_cast<int64_t>(std::max(1.0, limit_.burst) / limit_.rate_per_s * 1000);
  for (auto it = buckets_.begin(); it != buckets_.end();) {
    it = now_ms - it->second.updated_ms >= refill_ms ? buckets_.erase(it) : std::next(it);
  }
  // Still full of recent keys (a flood from many addresses): drop the oldest half. Forgetting a
  // bucket only ever grants that key a fresh burst, never refuses anyone.
  if (buckets_.size() >= max_keys_) {
    std::vector<int64_t> stamps;
    stamps.reserve(buckets_.size());
    for (const auto& [k, b] : buckets_) stamps.push_back(b.updated_ms);
    auto mid = stamps.begin() + static_cast<std::ptrdiff_t>(stamps.size() / 2);
    std::nth_element(stamps.begin(), mid, stamps.end());
    const int64_t cutoff = *mid;
    for (auto it = buckets_.begin(); it != buckets_.end();) {
      it = it->second.updated_ms <= cutoff ? buckets_.erase(it) : std::next(it);
    }
  }
}

}  // namespace stoa::hub
