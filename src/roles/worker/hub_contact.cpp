#include "roles/worker/hub_contact.h"

#include <algorithm>

#include "core/error.h"
#include "core/log.h"

namespace stoa::worker {

bool is_unreachable(const std::exception& error) {
  const auto* e = dynamic_cast<const Error*>(&error);
  if (!e || e->kind() != ErrorKind::kNetwork) return false;
  // check_ok words an answer "<what>: HTTP <status>: ..."; a 4xx is the hub speaking.
  const std::string text = e->what();
  return text.find(": HTTP 4") == std::string::npos;
}

void HubContact::answered(Clock::time_point) {
  std::lock_guard lock(mutex_);
  if (!state_.reachable) log_warn("worker", "the hub answers again");
  state_ = State{};
  failures_ = 0;
}

void HubContact::unreachable(std::string_view who, const std::string& why, Clock::time_point now) {
  std::lock_guard lock(mutex_);
  ++failures_;
  if (state_.reachable) {
    state_ = State{false, now, why};
    log_warn("worker", who, ": the hub cannot be reached (", why,
             "); trying again, less often as it lasts");
    return;
  }
  log_info("worker", who, ": the hub still cannot be reached (", why, ")");
}

HubContact::State HubContact::state() const {
  std::lock_guard lock(mutex_);
  return state_;
}

std::chrono::milliseconds HubContact::backoff(std::chrono::milliseconds base,
                                              std::chrono::milliseconds max) const {
  std::lock_guard lock(mutex_);
  return std::min(max, base * (int64_t{1} << std::min(failures_, 16)));
}

}  // namespace stoa::worker
