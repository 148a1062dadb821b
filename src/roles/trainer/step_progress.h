// The trainer's progress line: "step N of M (P%), about T left" where the run has a step budget
// ([run] max_steps or --max-steps), "step N" where it has none, with the step's reward and time.
// The time left is the average of this process's steps so far times the steps to go (a resumed
// run's earlier steps, done by another process at another pace, do not count). Logged at most
// every `every` (a trainer at a step a second would otherwise bury the log), and always at the
// last step.
#pragma once
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

namespace stoa::trainer {

// "45 s", "12 min", "3 h 05 min".
std::string format_duration(double seconds);

class StepProgress {
 public:
  using Clock = std::chrono::steady_clock;
  // `max_steps` <= 0: no budget. `first_step`: the last step done before this process started.
  StepProgress(int64_t max_steps, int64_t first_step, Clock::time_point start,
               std::chrono::milliseconds every = std::chrono::seconds(10));

  // The line for `step` ending at `now`, or nothing when one was logged less than `every` ago.
  std::optional<std::string> line(int64_t step, double reward_mean, double step_seconds,
                                  Clock::time_point now);

 private:
  int64_t max_steps_;
  int64_t first_step_;
  Clock::time_point start_;
  std::chrono::milliseconds every_;
  std::optional<Clock::time_point> last_line_;
};

}  // namespace stoa::trainer
