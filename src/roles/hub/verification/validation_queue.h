// Replay jobs for remote validators (`stoa validate --hub URL`, docs/design/verification.md): the
// hub's RolloutAuditor when [verify] remote is on. Accepted rollouts chosen for replay wait here
// (bounded, as the in-process validator's queue); a validator leases one (POST
// /v1/validation/lease) and answers with a verdict (POST /v1/validation/verdict). A job leased
// and not answered within `lease_ms` goes back to the front of the queue for the next validator,
// and its old job id is refused from then on. Thread-safe.
#pragma once
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>

#include "roles/hub/verification/rollout_audit.h"

namespace stoa::hub {

class ValidationQueue final : public RolloutAuditor {
 public:
  struct Leased {
    std::string job_id;
    AuditJob job;
    int64_t deadline_ms = 0;  // ms left to answer
  };
  // The outcome of handing in a verdict: the rollout it is about, or why it is refused.
  struct Completion {
    enum class Status { kAccepted, kUnknown, kExpired } status = Status::kUnknown;
    std::string rollout_id;
  };
  struct Stats {
    size_t queued = 0;
    size_t leased = 0;
    int64_t requeued = 0;  // leases that ran past their deadline
    int64_t completed = 0;
  };

  ValidationQueue(size_t max_queue, int64_t lease_ms);

  bool enqueue(AuditJob job) override;
  // A job for `validator`, waiting up to `wait` for one (0: just look). Expired leases are put
  // back first.
  std::optional<Leased> lease(const std::string& validator, std::chrono::milliseconds wait);
  // Ends the lease `job_id`: kAccepted with the job's rollout id the first time, kExpired when its
  // deadline passed (the job went back to the queue), kUnknown for an id never issued or already
  // answered.
  Completion complete(const std::string& job_id);
  // Called (outside the lock) whenever a job becomes available: wakes parked long-polls.
  void set_listener(std::function<void()> listener);
  Stats stats();
  void stop();  // wakes and refuses every waiting lease

 private:
  int64_t now_ms() const;
  void requeue_expired_locked(int64_t now);
  void notify();

  const size_t max_queue_;
  const int64_t lease_ms_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<AuditJob> queue_;
  struct InFlight {
    AuditJob job;
    std::string validator;
    int64_t deadline_ms = 0;
  };
  std::map<std::string, InFlight> leased_;  // job id -> the leased job
  std::set<std::string> expired_;           // job ids whose lease ran out (bounded)
  std::deque<std::string> expired_order_;
  int64_t requeued_ = 0;
  int64_t completed_ = 0;
  bool stopped_ = false;
  std::function<void()> listener_;
};

}  // namespace stoa::hub
