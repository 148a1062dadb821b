// Whether the hub answers, as the worker's threads find it: every call to the hub (heartbeat,
// lease, weight sync, rollouts) reports here whether it reached the hub. The progress report
// turns a lost contact into plain lines for the volunteer (one when the hub goes away, one when
// it is back, a reminder after a long absence) instead of a warning per failed call; the calls'
// own failures go to the detailed log (--verbose) once the first has been warned of, and the
// callers that retry on their own back off with the length of the outage.
#pragma once
#include <chrono>
#include <exception>
#include <mutex>
#include <string>
#include <string_view>

namespace stoa::worker {

// True for a failure to reach the hub (no connection, a timeout, a 5xx after the retries);
// false for an answer the hub gave (a 4xx: refused, not found) and for anything else.
bool is_unreachable(const std::exception& error);

class HubContact {
 public:
  using Clock = std::chrono::steady_clock;

  // A call the hub answered (with any status).
  void answered(Clock::time_point now = Clock::now());
  // A call that did not reach the hub: `who` names the caller in the log. The first failure
  // after an answer is a warning; its repeats are information.
  void unreachable(std::string_view who, const std::string& why,
                   Clock::time_point now = Clock::now());

  struct State {
    bool reachable = true;
    Clock::time_point since{};  // of the outage (when !reachable)
    std::string why;            // the first failure of the outage
  };
  State state() const;
  // The wait before a caller that retries on its own tries again: `base` while the hub answers,
  // doubling with each failure of an outage up to `max`.
  std::chrono::milliseconds backoff(std::chrono::milliseconds base,
                                    std::chrono::milliseconds max) const;

 private:
  mutable std::mutex mutex_;
  State state_;
  int failures_ = 0;
};

}  // namespace stoa::worker
