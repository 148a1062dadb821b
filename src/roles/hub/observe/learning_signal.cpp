#include "roles/hub/observe/learning_signal.h"

#include "core/error.h"

namespace stoa::hub {

bool step_without_signal(const StepReport& report) {
  if (report.groups > 0 && report.groups_uniform >= report.groups) return true;
  // Exactly 0, not small: a tiny norm is a small step, still a step.
  const auto grad = report.extra.find("grad_norm");
  return grad != report.extra.end() && grad->second == 0.0;
}

bool LearningSignalWatch::add(const StepReport& report) {
  ++steps_;
  groups_ += report.groups;
  groups_uniform_ += report.groups_uniform;
  if (!step_without_signal(report)) {
    streak_ = 0;
    return false;
  }
  ++steps_without_;
  ++streak_;
  return warn_after_ > 0 && streak_ % warn_after_ == 0;
}

std::string LearningSignalWatch::warning_text() const {
  if (!warning()) return "";
  return cat("no learning signal for the last ", streak_,
             " trainer steps: every group's rollouts earned the same reward (zero advantage) or "
             "the gradient was 0, so the policy is not changing (",
             groups_uniform_, " of ", groups_,
             " groups uniform so far). Check the task's reward: does it ever vary, can the model "
             "earn it at all, does it read an answer the observations reveal?");
}

}  // namespace stoa::hub
