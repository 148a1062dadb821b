// Whether the trainer's steps carry any learning signal. A step carries none when every group it
// closed was uniform (all of a group's rollouts earned the same reward, so the group-relative
// advantage is 0 for every token) or when its gradient norm was exactly 0 (e.g. every token
// masked). A run in that state is legal — it steps, publishes and looks busy — but learns
// nothing: a reward function that never varies, a task too hard (or too easy) for the model, or
// a reward that reads an answer the observations reveal. So the trainer's log, /v1/status,
// `stoa status`, the dashboard and /metrics all say so, from one watch over the step reports.
//
// Counts are of this process's lifetime (a restarted hub or trainer starts them again, as it
// does the step-duration histogram); the ledger keeps every step's report.
#pragma once
#include <cstdint>
#include <string>

#include "roles/hub/trainer_port.h"

namespace stoa::hub {

// Consecutive steps without signal after which the warning is raised ([trainer]
// no_signal_warn_steps). A short run of uniform steps is normal early on (a weak model earns 0
// everywhere); ten in a row is long enough to mean something and short enough to be noticed in
// the first minutes of a run whose reward is broken.
inline constexpr int64_t kDefaultNoSignalWarnSteps = 10;

// True when the step carries no learning signal (see above). A report without the gradient norm
// (extra["grad_norm"]) is judged by its groups alone.
bool step_without_signal(const StepReport& report);

class LearningSignalWatch {
 public:
  LearningSignalWatch() = default;  // warns after kDefaultNoSignalWarnSteps
  // warn_after ≤ 0: never warn (the counts are still kept).
  explicit LearningSignalWatch(int64_t warn_after) : warn_after_(warn_after) {}

  // Counts one step. True when this step raises the warning: the streak just reached
  // warn_after, or another warn_after steps passed since it did (a reminder, not a flood).
  bool add(const StepReport& report);

  int64_t steps() const { return steps_; }
  int64_t steps_without_signal() const { return steps_without_; }
  int64_t streak() const { return streak_; }  // consecutive steps without signal, up to now
  int64_t groups() const { return groups_; }
  int64_t groups_uniform() const { return groups_uniform_; }
  int64_t warn_after() const { return warn_after_; }
  bool warning() const { return warn_after_ > 0 && streak_ >= warn_after_; }
  // The warning in words ("" when there is none).
  std::string warning_text() const;

 private:
  int64_t warn_after_ = kDefaultNoSignalWarnSteps;
  int64_t steps_ = 0;
  int64_t steps_without_ = 0;
  int64_t streak_ = 0;
  int64_t groups_ = 0;
  int64_t groups_uniform_ = 0;
};

}  // namespace stoa::hub
