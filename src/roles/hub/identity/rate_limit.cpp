#include "roles/hub/identity/rate_limit.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace stoa::hub {

void TokenBuckets::refill(Bucket& bucket, int64_t now_ms) {
  if (now_ms <= bucket.touched_ms) return;
  const double elapsed_s = static_cast<double>(now_ms - bucket.touched_ms) / 1000.0;
  bucket.tokens =
      std::min(bucket.shape.capacity, bucket.tokens + elapsed_s * bucket.shape.per_second);
  bucket.touched_ms = now_ms;
}

double TokenBuckets::take(const std::string& key, double amount, Shape shape, int64_t now_ms) {
  auto it = buckets_.find(key);
  if (it == buckets_.end()) {
    if (buckets_.size() >= max_keys_) make_room(now_ms);
    it = buckets_.emplace(key, Bucket{shape.capacity, shape, now_ms}).first;
  }
  Bucket& bucket = it->second;
  refill(bucket, now_ms);
  if (amount <= bucket.tokens) {
    bucket.tokens -= amount;
    return 0;
  }
  const double short_by = std::min(amount, bucket.shape.capacity) - bucket.tokens;
  return short_by / bucket.shape.per_second;
}

void TokenBuckets::give_back(const std::string& key, double amount) {
  auto it = buckets_.find(key);
  if (it == buckets_.end()) return;
  it->second.tokens = std::min(it->second.shape.capacity, it->second.tokens + amount);
}

void TokenBuckets::make_room(int64_t now_ms) {
  for (auto it = buckets_.begin(); it != buckets_.end();) {
    refill(it->second, now_ms);
    it = it->second.tokens >= it->second.shape.capacity ? buckets_.erase(it) : std::next(it);
  }
  if (buckets_.size() < max_keys_) return;
  // Still full of buckets in use (a flood from many keys): the half touched longest ago goes.
  std::vector<int64_t> stamps;
  stamps.reserve(buckets_.size());
  for (const auto& [key, bucket] : buckets_) stamps.push_back(bucket.touched_ms);
  auto mid = stamps.begin() + static_cast<std::ptrdiff_t>(stamps.size() / 2);
  std::nth_element(stamps.begin(), mid, stamps.end());
  const int64_t cutoff = *mid;
  for (auto it = buckets_.begin(); it != buckets_.end();) {
    if (it->second.touched_ms <= cutoff) {
      it = buckets_.erase(it);
      ++forgotten_early_;
    } else {
      ++it;
    }
  }
}

int64_t RateLimiter::acquire(const std::string& key, int64_t now_ms) {
  if (limit_.rate_per_s <= 0) return 0;
  const double wait_s =
      buckets_.take(key, 1.0, {std::max(1.0, limit_.burst), limit_.rate_per_s}, now_ms);
  if (wait_s <= 0) return 0;
  return std::max<int64_t>(1, static_cast<int64_t>(std::ceil(wait_s * 1000.0)));
}

}  // namespace stoa::hub
