#include "roles/hub/verification/validation_queue.h"

#include "core/log.h"
#include "net/protocol.h"

namespace stoa::hub {

namespace {
// Expired job ids remembered so that a late verdict is told "expired", not "unknown".
constexpr size_t kRememberExpired = 4096;
}  // namespace

ValidationQueue::ValidationQueue(size_t max_queue, int64_t lease_ms)
    : max_queue_(max_queue), lease_ms_(lease_ms) {}

int64_t ValidationQueue::now_ms() const {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

bool ValidationQueue::enqueue(AuditJob job) {
  {
    std::lock_guard lock(mutex_);
    if (stopped_ || queue_.size() + leased_.size() >= max_queue_) return false;
    queue_.push_back(std::move(job));
  }
  cv_.notify_one();
  notify();
  return true;
}

void ValidationQueue::requeue_expired_locked(int64_t now) {
  for (auto it = leased_.begin(); it != leased_.end();) {
    if (it->second.deadline_ms > now) {
      ++it;
      continue;
    }
    log_warn("verify", "validation job ", it->first, " (rollout ", it->second.job.rollout.id,
             ") leased by '", it->second.validator, "' got no verdict in ", lease_ms_,
             " ms: back in the queue");
    queue_.push_front(std::move(it->second.job));
    expired_.insert(it->first);
    expired_order_.push_back(it->first);
    if (expired_order_.size() > kRememberExpired) {
      expired_.erase(expired_order_.front());
      expired_order_.pop_front();
    }
    ++requeued_;
    it = leased_.erase(it);
  }
}

std::optional<ValidationQueue::Leased> ValidationQueue::lease(const std::string& validator,
                                                              std::chrono::milliseconds wait) {
  std::unique_lock lock(mutex_);
  const auto until = std::chrono::steady_clock::now() + wait;
  while (true) {
    if (stopped_) return std::nullopt;
    const int64_t now = now_ms();
    requeue_expired_locked(now);
    if (!queue_.empty()) {
      Leased out;
      out.job_id = net::random_token();
      out.deadline_ms = lease_ms_;
      out.job = queue_.front();
      queue_.pop_front();
      leased_[out.job_id] = InFlight{out.job, validator, now + lease_ms_};
      return out;
    }
    if (std::chrono::steady_clock::now() >= until) return std::nullopt;
    // Wake for a new job, or when the earliest lease in flight runs out.
    auto next = until;
    for (const auto& [id, f] : leased_)
      next = std::min(
          next, std::chrono::steady_clock::now() + std::chrono::milliseconds(f.deadline_ms - now));
    cv_.wait_until(lock, next);
  }
}

ValidationQueue::Completion ValidationQueue::complete(const std::string& job_id) {
  std::lock_guard lock(mutex_);
  requeue_expired_locked(now_ms());
  Completion c;
  if (auto it = leased_.find(job_id); it != leased_.end()) {
    c.status = Completion::Status::kAccepted;
    c.rollout_id = it->second.job.rollout.id;
    leased_.erase(it);
    ++completed_;
  } else if (expired_.count(job_id)) {
    c.status = Completion::Status::kExpired;
  }
  return c;
}

void ValidationQueue::set_listener(std::function<void()> listener) {
  std::lock_guard lock(mutex_);
  listener_ = std::move(listener);
}

void ValidationQueue::notify() {
  std::function<void()> listener;
  {
    std::lock_guard lock(mutex_);
    listener = listener_;
  }
  if (listener) listener();
}

ValidationQueue::Stats ValidationQueue::stats() {
  std::lock_guard lock(mutex_);
  requeue_expired_locked(now_ms());
  return {queue_.size(), leased_.size(), requeued_, completed_};
}

void ValidationQueue::stop() {
  {
    std::lock_guard lock(mutex_);
    stopped_ = true;
  }
  cv_.notify_all();
}

}  // namespace stoa::hub
