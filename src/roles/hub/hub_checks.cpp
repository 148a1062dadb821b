// Replay verification's calls on the hub (hub_checks.h): each takes the hub's lock and hands over
// to Verification (verification/verification.h), which decides; a verdict that may release a
// held group wakes take_groups.
#include "roles/hub/hub_checks.h"

#include "roles/hub/hub_state.h"
#include "roles/hub/request_error.h"
#include "roles/hub/verification/verification.h"

namespace stoa::hub {

void HubChecks::set_auditor(RolloutAuditor* auditor) {
  std::lock_guard<std::mutex> lock(state_.mutex_);
  state_.verification_->set_auditor(auditor);
}

bool HubChecks::quarantined(const std::string& worker_id) const {
  std::lock_guard<std::mutex> lock(state_.mutex_);
  return state_.verification_->quarantined(worker_id);
}

void HubChecks::record_verdict(const std::string& rollout_id, const AuditVerdict& verdict) {
  {
    std::lock_guard<std::mutex> lock(state_.mutex_);
    if (!state_.verification_->on()) return;
    state_.verification_->record_verdict(rollout_id, verdict);
  }
  state_.groups_cv_.notify_all();
}

std::optional<CheckLease> HubChecks::lease_check(const std::string& worker_id,
                                                 const std::string& peer) {
  std::lock_guard<std::mutex> lock(state_.mutex_);
  state_.verification_->require_peer_checks();
  state_.identity_.throttle(Identity::Limit::kLeasePerWorker, worker_id,
                            "check leases (this worker)");
  return state_.verification_->lease_check(worker_id, peer, state_.versions_.latest_published());
}

std::string HubChecks::record_check(const std::string& worker_id, const std::string& job_id,
                                    const AuditVerdict& verdict) {
  std::lock_guard<std::mutex> lock(state_.mutex_);
  state_.verification_->require_peer_checks();
  std::string rollout_id = state_.verification_->record_check(worker_id, job_id, verdict);
  if (!rollout_id.empty()) state_.groups_cv_.notify_all();
  return rollout_id;
}

size_t HubChecks::checks_waiting() const {
  std::lock_guard<std::mutex> lock(state_.mutex_);
  return state_.verification_->checks_waiting();
}

}  // namespace stoa::hub
