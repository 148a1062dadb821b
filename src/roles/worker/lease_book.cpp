#include "roles/worker/lease_book.h"

#include <algorithm>
#include <chrono>
#include <exception>

#include "core/log.h"

namespace stoa::worker {

void LeaseBook::add(std::shared_ptr<LeaseWork> work) {
  std::lock_guard lock(mutex_);
  works_.push_back(std::move(work));
}

std::shared_ptr<LeaseWork> LeaseBook::next_to_start() const {
  std::lock_guard lock(mutex_);
  for (const auto& w : works_)
    if (w->to_start > 0 && !w->cancelled) return w;
  return nullptr;
}

void LeaseBook::started(LeaseWork& work) {
  std::lock_guard lock(mutex_);
  --work.to_start;
  ++work.running;
}

void LeaseBook::ended(LeaseWork& work) {
  std::lock_guard lock(mutex_);
  --work.running;
}

bool LeaseBook::cancelled(const LeaseWork& work) const {
  std::lock_guard lock(mutex_);
  return work.cancelled;
}

void LeaseBook::forget_finished() {
  std::lock_guard lock(mutex_);
  std::erase_if(
      works_, [](const auto& w) { return w->running == 0 && (w->to_start == 0 || w->cancelled); });
}

std::vector<std::string> LeaseBook::lease_ids() const {
  std::lock_guard lock(mutex_);
  std::vector<std::string> ids;
  for (const auto& w : works_) ids.push_back(w->lease.lease_id);
  return ids;
}

void LeaseBook::mark_cancelled(const std::vector<std::string>& lease_ids) {
  std::lock_guard lock(mutex_);
  for (const std::string& id : lease_ids)
    for (auto& w : works_)
      if (w->lease.lease_id == id) w->cancelled = true;
}

std::vector<std::shared_ptr<LeaseWork>> LeaseBook::unfinished() const {
  std::lock_guard lock(mutex_);
  std::vector<std::shared_ptr<LeaseWork>> out;
  for (const auto& w : works_)
    if (!w->cancelled && (w->to_start > 0 || w->running > 0)) out.push_back(w);
  return out;
}

std::shared_ptr<LeaseWork> lease_group(net::HubClient& hub, int64_t max_tokens,
                                       int64_t* retry_after_ms, HubContact& contact,
                                       std::atomic<bool>& run_ended) {
  using namespace std::chrono_literals;
  net::LeaseResponse lr;
  try {
    lr = hub.lease();
    contact.answered();
  } catch (const net::JoinRefused&) {
    throw;  // the session could not be resumed: the join token was revoked
  } catch (const std::exception& e) {
    if (is_unreachable(e)) {
      // Told once (hub_contact.h); asked again less often as the outage lasts.
      contact.unreachable("lease", e.what());
      lr.retry_after_ms = contact.backoff(2000ms, 30000ms).count();
    } else {
      contact.answered();
      // A quarantined worker's every call is refused: stop it with the hub's reason.
      if (std::string(e.what()).find("quarantined") != std::string::npos) throw;
      log_warn("worker", "lease: ", e.what());
      lr.retry_after_ms = 2000;
    }
  }
  if (lr.run_ended) run_ended = true;
  if (lr.lease && static_cast<int64_t>(lr.lease->prompt_tokens.size()) >= max_tokens) {
    // No room to generate: hand it back rather than fail, and do not ask again at once.
    log_warn("worker", "lease ", lr.lease->lease_id, ": the prompt has ",
             lr.lease->prompt_tokens.size(), " tokens, max_tokens is ", max_tokens,
             "; releasing it");
    try {
      hub.release(lr.lease->lease_id);
    } catch (const std::exception& e) {
      log_warn("worker", "release ", lr.lease->lease_id, ": ", e.what());
    }
    lr.lease.reset();
    lr.retry_after_ms = 1000;
  }
  if (!lr.lease) {
    *retry_after_ms = lr.retry_after_ms;
    return nullptr;
  }
  auto w = std::make_shared<LeaseWork>();
  w->lease = *lr.lease;
  w->problem.id = w->lease.prompt_id;
  w->problem.question = w->lease.question;
  w->to_start = w->lease.samples;
  return w;
}

}  // namespace stoa::worker
