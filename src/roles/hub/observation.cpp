// The Hub's side of observability: the snapshot copied under its lock, and the reports built
// from it after the lock is released (observe/hub_report.h).
#include "roles/hub/hub.h"
#include "roles/hub/observe/hub_counters.h"
#include "roles/hub/observe/hub_report.h"
#include "roles/hub/verification/verification.h"
#include "roles/hub/verification/verification_state.h"

namespace stoa::hub {

using nlohmann::json;

std::vector<WorkerStats> Hub::workers() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<WorkerStats> out;
  for (const auto& [id, w] : roster_.stats()) out.push_back(w);
  return out;
}

HubSnapshot Hub::snapshot(size_t offset, size_t limit) const {
  HubSnapshot s;
  std::lock_guard<std::mutex> lock(mutex_);
  s.counters = *counters_;
  s.counters.rate_limited = identity_.rate_limited();
  s.counters.ledger_busy = ledger_->busy();
  s.groups_queued = book_.queued_groups();
  s.workers_total = roster_.size();
  s.versions = versions_.published_count();
  s.leases_open = static_cast<int64_t>(book_.open_leases().size());
  s.latest_version = versions_.latest();
  s.step = last_step_;
  s.ledger = ledger_->stats();
  s.now_ms = now();
  verification_->add_counters(s.verification);
  if (const VerificationState* v = verification_->state()) {
    s.verified_by_target = v->by_target;
    s.verified_pass = v->passed;
    s.verified_fail = v->failed;
    s.quarantined = v->quarantined.size();
  }
  s.offset = std::min(offset, roster_.size());
  auto it = roster_.stats().begin();
  std::advance(it, static_cast<std::ptrdiff_t>(s.offset));
  for (; it != roster_.stats().end() && s.workers.size() < limit; ++it) {
    WorkerStats w = it->second;
    w.leases_held = book_.fairness().held(w.id);
    w.standing = standing_name(book_.fairness().standing(w.id));
    s.workers.push_back(std::move(w));
  }
  s.lease_waiters = book_.fairness().waiters();
  s.hoarders = book_.fairness().hoarders();
  s.verification_on = verification_->on();
  return s;
}

std::map<std::string, double> Hub::counters() const {
  return counter_map(snapshot(0, 0));
}

json Hub::status(size_t offset, size_t limit) const {
  limit = std::min(limit, config_.status_max_workers);
  return status_json(
      snapshot(offset, limit),
      ReportContext{deps_.task->name(), config_.beyond_loopback, limit, config_.verify});
}

json Hub::history(int64_t since_step, int64_t since_version) const {
  return history_.to_json(since_step, since_version);
}

std::string Hub::metrics() const {
  // Per-worker series for at most metrics_max_workers workers (idle ones expire), from one
  // snapshot, rendered outside the hub's lock.
  const size_t limit = config_.metrics_max_workers;
  return metrics_text(snapshot(0, limit), ReportContext{deps_.task->name(), config_.beyond_loopback,
                                                        limit, config_.verify});
}

void Hub::record_step_history_locked(const StepReport& report) {
  history_.add_step(
      step_point(report, now(), counters_->start_ms, versions_.latest(), roster_.stats()));
}

}  // namespace stoa::hub
