// The run over time, for the dashboard's charts: one point per trainer step (reward, DPPO masked
// fraction and TV, trainer busy fraction, the share of uniform groups, the fleet's tokens/s, idle
// fraction and patch lag at that moment) and one per published version (patch and anchor bytes).
// Bounded rings: a run of any length costs at most kCapacity points of each kind, and a long run
// keeps every k-th old point (decimated) so the charts still span the whole run. It has its own
// mutex, so /v1/history is never built under the hub's intake lock.
#pragma once
#include <cstdint>
#include <deque>
#include <mutex>

#include <nlohmann/json.hpp>

namespace stoa::hub {

struct StepPoint {
  int64_t step = 0;
  double t_s = 0;  // seconds since the hub started
  double reward_mean = 0;
  double masked_fraction = 0;
  double tv = 0;
  double busy_fraction = 0;
  double step_seconds = 0;
  int64_t workers = 0;
  double fleet_tokens_per_s = 0;    // sum over live workers
  double worker_idle_fraction = 0;  // mean over live workers
  double patch_lag_mean = 0;        // versions behind the latest, mean over live workers
  // Of the step's groups, the share that was uniform (zero advantage), and whether the step
  // carried no learning signal at all (observe/learning_signal.h).
  double uniform_fraction = 0;
  bool no_signal = false;
};

struct VersionPoint {
  uint64_t version = 0;
  double t_s = 0;
  uint64_t patch_bytes = 0;   // 0: none (the first version, an anchor only)
  uint64_t anchor_bytes = 0;  // 0: no anchor with this version
};

class RunHistory {
 public:
  static constexpr size_t kCapacity = 2048;

  void add_step(const StepPoint& point);
  void add_version(const VersionPoint& point);

  // {"steps": [...], "versions": [...]}: the kept points with step > since_step and version >
  // since_version (a polling page asks only for what it has not seen).
  nlohmann::json to_json(int64_t since_step = -1, int64_t since_version = -1) const;

 private:
  template <typename Point>
  static void push_bounded(std::deque<Point>& ring, const Point& point);

  mutable std::mutex mutex_;
  std::deque<StepPoint> steps_;
  std::deque<VersionPoint> versions_;
};

}  // namespace stoa::hub
