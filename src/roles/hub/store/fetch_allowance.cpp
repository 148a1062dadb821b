#include "roles/hub/store/fetch_allowance.h"

#include <algorithm>
#include <cmath>

#include "core/log.h"

namespace stoa::hub {
namespace {

// Worker ids are the hub's own ("w-" and hex digits): the key names one pair.
std::string key_of(const std::string& worker, const Hash128& blob) {
  return worker + "\n" + blob.hex();
}

int64_t millis(FetchAllowance::Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
}

}  // namespace

std::chrono::seconds FetchAllowance::take(const std::string& worker, const Hash128& blob,
                                          uint64_t blob_bytes, uint64_t bytes,
                                          Clock::time_point now) {
  if (options_.fetches <= 0 || bytes == 0) return std::chrono::seconds(0);
  const TokenBuckets::Shape shape{
      std::max(options_.fetches * static_cast<double>(blob_bytes),
               static_cast<double>(options_.min_bytes)),
      std::max(static_cast<double>(blob_bytes), 1.0) /
          static_cast<double>(std::max<int64_t>(1, options_.refill.count()))};
  std::lock_guard lock(mutex_);
  const uint64_t forgotten = buckets_.forgotten_early();
  const double wait_s =
      buckets_.take(key_of(worker, blob), static_cast<double>(bytes), shape, millis(now));
  if (buckets_.forgotten_early() != forgotten)
    log_warn("hub", "fetch allowance: ", options_.max_entries,
             " (worker, blob) buckets in use; forgot the ", buckets_.forgotten_early() - forgotten,
             " touched longest ago");
  if (wait_s <= 0) return std::chrono::seconds(0);
  ++refusals_;
  refused_bytes_ += bytes;
  return std::chrono::seconds(std::max<int64_t>(1, static_cast<int64_t>(std::ceil(wait_s))));
}

void FetchAllowance::give_back(const std::string& worker, const Hash128& blob, uint64_t bytes) {
  if (options_.fetches <= 0 || bytes == 0) return;
  std::lock_guard lock(mutex_);
  buckets_.give_back(key_of(worker, blob), static_cast<double>(bytes));
}

FetchAllowanceStats FetchAllowance::stats() const {
  std::lock_guard lock(mutex_);
  return {refusals_, refused_bytes_, buckets_.size()};
}

}  // namespace stoa::hub
