// A rate over a rolling window of wall-clock time, for the worker's tokens/s: samples of a
// cumulative counter (tokens generated so far, counted as each token is sampled) taken whenever
// someone looks, and the rate is the counter's growth across the samples of the last `window`.
// Measured per heartbeat interval instead, a worker that waits a few seconds between leases
// reports 0 for most intervals; over ~30 s it reports what it actually produces.
#pragma once
#include <chrono>
#include <cstdint>
#include <deque>
#include <mutex>

namespace stoa::worker {

class RollingRate {
 public:
  using Clock = std::chrono::steady_clock;
  explicit RollingRate(std::chrono::milliseconds window = std::chrono::seconds(30))
      : window_(window) {}

  // Records the counter's value at `now` and returns the rate (per second) over the samples of
  // the last window: 0 until two samples are at least 100 ms apart. Thread-safe.
  double sample(uint64_t cumulative, Clock::time_point now = Clock::now());

 private:
  struct Point {
    Clock::time_point t;
    uint64_t value;
  };
  std::chrono::milliseconds window_;
  std::mutex mutex_;
  std::deque<Point> points_;
};

}  // namespace stoa::worker
