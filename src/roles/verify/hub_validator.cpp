#include "roles/verify/hub_validator.h"

#include "core/error.h"
#include "core/log.h"

namespace stoa::verify {

HubValidator::HubValidator(ReplayValidator& validator, VerdictSink sink, size_t max_queue)
    : validator_(validator), sink_(std::move(sink)), max_queue_(max_queue) {
  thread_ = std::thread([this] { run(); });
}

HubValidator::~HubValidator() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

bool HubValidator::enqueue(hub::AuditJob job) {
  {
    std::lock_guard lock(mutex_);
    if (stop_ || queue_.size() >= max_queue_) return false;
    queue_.push_back(std::move(job));
  }
  cv_.notify_one();
  return true;
}

void HubValidator::drain() {
  std::unique_lock lock(mutex_);
  idle_cv_.wait(lock, [&] { return stop_ || (queue_.empty() && !busy_); });
}

size_t HubValidator::queued() const {
  std::lock_guard lock(mutex_);
  return queue_.size();
}

void HubValidator::run() {
  while (true) {
    hub::AuditJob job;
    {
      std::unique_lock lock(mutex_);
      cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      if (stop_) break;
      job = std::move(queue_.front());
      queue_.pop_front();
      busy_ = true;
    }
    const Verdict v = validator_.check(job.rollout, job.problem, job.prompt_length);
    try {
      sink_(job.rollout.id, hub::audit_verdict(v));
    } catch (const std::exception& e) {
      log_error("verify", "recording the verdict on rollout ", job.rollout.id, ": ", e.what());
    }
    {
      std::lock_guard lock(mutex_);
      busy_ = false;
    }
    idle_cv_.notify_all();
  }
  idle_cv_.notify_all();
}

QueueValidator::QueueValidator(ReplayValidator& validator, hub::ValidationQueue& queue,
                               VerdictSink sink)
    : validator_(validator), queue_(queue), sink_(std::move(sink)) {
  thread_ = std::thread([this] {
    while (!stop_) {
      auto leased = queue_.lease("hub", std::chrono::milliseconds(200));
      if (!leased) continue;
      const Verdict v =
          validator_.check(leased->job.rollout, leased->job.problem, leased->job.prompt_length);
      if (queue_.complete(leased->job_id).status !=
          hub::ValidationQueue::Completion::Status::kAccepted)
        continue;  // its lease ran out meanwhile: another validator has it
      try {
        sink_(leased->job.rollout.id, hub::audit_verdict(v));
      } catch (const std::exception& e) {
        log_error("verify", "recording the verdict on rollout ", leased->job.rollout.id, ": ",
                  e.what());
      }
    }
  });
}

QueueValidator::~QueueValidator() {
  stop_ = true;
  thread_.join();
}

}  // namespace stoa::verify
