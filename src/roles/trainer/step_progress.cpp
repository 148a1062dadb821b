#include "roles/trainer/step_progress.h"

#include <cmath>
#include <cstdio>

#include "core/error.h"

namespace stoa::trainer {

std::string format_duration(double seconds) {
  const auto s = static_cast<int64_t>(std::llround(std::max(0.0, seconds)));
  char buf[48];
  if (s < 60) {
    std::snprintf(buf, sizeof buf, "%lld s", static_cast<long long>(s));
  } else if (s < 3600) {
    std::snprintf(buf, sizeof buf, "%lld min", static_cast<long long>((s + 30) / 60));
  } else {
    const int64_t m = (s + 30) / 60;
    std::snprintf(buf, sizeof buf, "%lld h %02lld min", static_cast<long long>(m / 60),
                  static_cast<long long>(m % 60));
  }
  return buf;
}

StepProgress::StepProgress(int64_t max_steps, int64_t first_step, Clock::time_point start,
                           std::chrono::milliseconds every)
    : max_steps_(max_steps), first_step_(first_step), start_(start), every_(every) {}

std::optional<std::string> StepProgress::line(int64_t step, double reward_mean, double step_seconds,
                                              Clock::time_point now) {
  const bool last = max_steps_ > 0 && step >= max_steps_;
  if (!last && last_line_ && now - *last_line_ < every_) return std::nullopt;
  last_line_ = now;
  char figures[96];
  std::snprintf(figures, sizeof figures, " (reward %.4f, %.1f s)", reward_mean, step_seconds);
  if (max_steps_ <= 0) return cat("step ", step, figures);
  const double done = static_cast<double>(step - first_step_);
  std::string left;
  if (last) {
    left = ", done";
  } else if (done > 0) {
    const double per_step = std::chrono::duration<double>(now - start_).count() / done;
    left = cat(", about ", format_duration(per_step * static_cast<double>(max_steps_ - step)),
               " left");
  }
  const int percent = static_cast<int>(100.0 * static_cast<double>(step) / max_steps_);
  return cat("step ", step, " of ", max_steps_, " (", percent, "%)", left, figures);
}

}  // namespace stoa::trainer
