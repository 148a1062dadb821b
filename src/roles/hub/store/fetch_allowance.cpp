#include "roles/hub/store/fetch_allowance.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/log.h"

namespace stoa::hub {

void FetchAllowance::refill(Bucket& bucket, Clock::time_point now) const {
  if (now <= bucket.touched) return;
  const double elapsed = std::chrono::duration<double>(now - bucket.touched).count();
  bucket.bytes = std::min(bucket.capacity, bucket.bytes + elapsed * bucket.per_second);
  bucket.touched = now;
}

std::chrono::seconds FetchAllowance::take(const std::string& worker, const Hash128& blob,
                                          uint64_t blob_bytes, uint64_t bytes,
                                          Clock::time_point now) {
  if (options_.fetches <= 0 || bytes == 0) return std::chrono::seconds(0);
  std::lock_guard lock(mutex_);
  auto key = std::make_pair(worker, blob.hex());
  auto it = buckets_.find(key);
  if (it == buckets_.end()) {
    make_room(now);
    Bucket fresh;
    fresh.capacity = std::max(options_.fetches * static_cast<double>(blob_bytes),
                              static_cast<double>(options_.min_bytes));
    fresh.bytes = fresh.capacity;
    fresh.per_second = std::max(static_cast<double>(blob_bytes), 1.0) /
                       static_cast<double>(std::max<int64_t>(1, options_.refill.count()));
    fresh.touched = now;
    it = buckets_.emplace(std::move(key), fresh).first;
  }
  Bucket& bucket = it->second;
  refill(bucket, now);
  const double want = static_cast<double>(bytes);
  if (want <= bucket.bytes) {
    bucket.bytes -= want;
    return std::chrono::seconds(0);
  }
  ++refusals_;
  refused_bytes_ += bytes;
  // A request larger than the whole bucket never fits: say when the bucket is full again.
  const double short_by = std::min(want, bucket.capacity) - bucket.bytes;
  return std::chrono::seconds(
      std::max<int64_t>(1, static_cast<int64_t>(std::ceil(short_by / bucket.per_second))));
}

void FetchAllowance::give_back(const std::string& worker, const Hash128& blob, uint64_t bytes) {
  if (options_.fetches <= 0 || bytes == 0) return;
  std::lock_guard lock(mutex_);
  auto it = buckets_.find({worker, blob.hex()});
  if (it == buckets_.end()) return;  // dropped meanwhile: it was full
  it->second.bytes = std::min(it->second.capacity, it->second.bytes + static_cast<double>(bytes));
}

void FetchAllowance::make_room(Clock::time_point now) {
  if (buckets_.size() < options_.max_entries) return;
  // Full buckets first: forgetting one changes nothing.
  for (auto it = buckets_.begin(); it != buckets_.end();) {
    refill(it->second, now);
    it = it->second.bytes >= it->second.capacity ? buckets_.erase(it) : std::next(it);
  }
  if (buckets_.size() < options_.max_entries) return;
  // Then the half touched longest ago: those workers get their allowance back early, which is
  // the safe side for the honest ones among them.
  std::vector<std::pair<Clock::time_point, decltype(buckets_)::iterator>> by_age;
  by_age.reserve(buckets_.size());
  for (auto it = buckets_.begin(); it != buckets_.end(); ++it)
    by_age.emplace_back(it->second.touched, it);
  const size_t drop = by_age.size() / 2;
  std::nth_element(by_age.begin(), by_age.begin() + static_cast<std::ptrdiff_t>(drop), by_age.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  for (size_t i = 0; i < drop; ++i) buckets_.erase(by_age[i].second);
  log_warn("hub", "fetch allowance: ", options_.max_entries,
           " (worker, blob) buckets in use; forgot the ", drop, " touched longest ago");
}

FetchAllowanceStats FetchAllowance::stats() const {
  std::lock_guard lock(mutex_);
  return {refusals_, refused_bytes_, buckets_.size()};
}

}  // namespace stoa::hub
