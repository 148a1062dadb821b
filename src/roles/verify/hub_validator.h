// Replay verification on the hub's spare threads: a bounded queue of AuditJobs the hub fills at
// intake (hub::RolloutAuditor) and one thread that replays them with a ReplayValidator and hands
// each verdict back to the hub (HubChecks::record_verdict). One thread keeps the validation cost
// off the trainer's cores; a full queue refuses jobs (the hub counts them) instead of blocking
// intake.
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

#include "roles/hub/verification/rollout_audit.h"
#include "roles/hub/verification/validation_queue.h"
#include "roles/verify/replay_validator.h"

namespace stoa::verify {

class HubValidator final : public hub::RolloutAuditor {
 public:
  using VerdictSink = std::function<void(const std::string& rollout_id, const hub::AuditVerdict&)>;
  // `validator` must outlive this; `sink` gets every verdict (on the validation thread).
  HubValidator(ReplayValidator& validator, VerdictSink sink, size_t max_queue = 256);
  ~HubValidator() override;  // stops the thread; queued jobs are dropped (no verdict)

  bool enqueue(hub::AuditJob job) override;
  // Blocks until the queue is empty and no job is running (tests, a clean shutdown).
  void drain();
  size_t queued() const;

 private:
  void run();

  ReplayValidator& validator_;
  VerdictSink sink_;
  size_t max_queue_;
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  std::condition_variable idle_cv_;
  std::deque<hub::AuditJob> queue_;
  bool busy_ = false;
  bool stop_ = false;
  std::thread thread_;
};

// The hub's own validation thread beside remote validators ([verify] remote with threads >= 1):
// it leases jobs from the same ValidationQueue the validation routes serve, so a job is replayed
// by whichever validator is free first.
class QueueValidator {
 public:
  using VerdictSink = HubValidator::VerdictSink;
  QueueValidator(ReplayValidator& validator, hub::ValidationQueue& queue, VerdictSink sink);
  ~QueueValidator();  // stops the thread after the job in hand (its verdict still goes out)

 private:
  ReplayValidator& validator_;
  hub::ValidationQueue& queue_;
  VerdictSink sink_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace stoa::verify
