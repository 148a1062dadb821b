#include "roles/worker/token_rate.h"

namespace stoa::worker {

double RollingRate::sample(uint64_t cumulative, Clock::time_point now) {
  std::lock_guard lock(mutex_);
  // A counter that went backwards (a restarted source) starts the window afresh.
  if (!points_.empty() && cumulative < points_.back().value) points_.clear();
  points_.push_back({now, cumulative});
  // Keep the newest sample at or before the window's start: the rate then covers the whole
  // window, not just the part after the first sample inside it.
  while (points_.size() > 2 && points_[1].t <= now - window_) points_.pop_front();
  const Point& first = points_.front();
  const double secs = std::chrono::duration<double>(now - first.t).count();
  if (secs < 0.1) return 0;
  return static_cast<double>(cumulative - first.value) / secs;
}

}  // namespace stoa::worker
