#include "roles/hub/observe/run_history.h"

namespace stoa::hub {

using nlohmann::json;

template <typename Point>
void RunHistory::push_bounded(std::deque<Point>& ring, const Point& point) {
  ring.push_back(point);
  if (ring.size() <= kCapacity) return;
  // Full: drop every second point of the older half. The recent half keeps full resolution, the
  // chart keeps its start, and the ring shrinks to 3/4 so this runs once per kCapacity/4 points.
  std::deque<Point> kept;
  const size_t half = ring.size() / 2;
  for (size_t i = 0; i < ring.size(); ++i)
    if (i >= half || i % 2 == 0) kept.push_back(ring[i]);
  ring.swap(kept);
}

void RunHistory::add_step(const StepPoint& point) {
  std::lock_guard<std::mutex> lock(mutex_);
  push_bounded(steps_, point);
}

void RunHistory::add_version(const VersionPoint& point) {
  std::lock_guard<std::mutex> lock(mutex_);
  push_bounded(versions_, point);
}

json RunHistory::to_json(int64_t since_step, int64_t since_version) const {
  std::lock_guard<std::mutex> lock(mutex_);
  json steps = json::array();
  for (const auto& p : steps_) {
    if (p.step <= since_step) continue;
    steps.push_back({{"step", p.step},
                     {"t_s", p.t_s},
                     {"reward_mean", p.reward_mean},
                     {"masked_fraction", p.masked_fraction},
                     {"tv", p.tv},
                     {"busy_fraction", p.busy_fraction},
                     {"step_seconds", p.step_seconds},
                     {"workers", p.workers},
                     {"fleet_tokens_per_s", p.fleet_tokens_per_s},
                     {"worker_idle_fraction", p.worker_idle_fraction},
                     {"patch_lag_mean", p.patch_lag_mean},
                     {"uniform_fraction", p.uniform_fraction},
                     {"no_signal", p.no_signal}});
  }
  json versions = json::array();
  for (const auto& v : versions_) {
    if (static_cast<int64_t>(v.version) <= since_version) continue;
    versions.push_back({{"version", v.version},
                        {"t_s", v.t_s},
                        {"patch_bytes", v.patch_bytes},
                        {"anchor_bytes", v.anchor_bytes}});
  }
  return {{"steps", steps}, {"versions", versions}};
}

}  // namespace stoa::hub
