// The Hub's verification calls (docs/design/verification.md): each takes the hub's lock and
// hands over to Verification (verification/verification.h), which decides; a verdict that may
// release a held group wakes take_groups. The validator's token check is the identity's.
#include "roles/hub/hub.h"
#include "roles/hub/verification/verification.h"

namespace stoa::hub {

void Hub::set_auditor(RolloutAuditor* auditor) {
  std::lock_guard<std::mutex> lock(mutex_);
  verification_->set_auditor(auditor);
}

bool Hub::is_validator(const std::string& bearer) {
  std::lock_guard<std::mutex> lock(mutex_);
  identity_.refresh(ledger_->reader());
  // Both scopes are always compared: the time does not depend on which one matched.
  const bool op = identity_.match(bearer, Identity::kOperatorScope).has_value();
  const bool validate = identity_.match(bearer, Identity::kValidateScope).has_value();
  return op || validate;
}

void Hub::check_validator(const std::string& bearer) {
  if (bearer.empty())
    throw RequestError(401,
                       "validation: missing Authorization: Bearer <operator or validate token>");
  if (!is_validator(bearer))
    throw RequestError(403, "validation: the token is not an operator or validate token");
}

bool Hub::quarantined(const std::string& worker_id) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return verification_->quarantined(worker_id);
}

void Hub::record_verdict(const std::string& rollout_id, const AuditVerdict& verdict) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!verification_->on()) return;
    verification_->record_verdict(rollout_id, verdict);
  }
  groups_cv_.notify_all();
}

std::optional<CheckLease> Hub::lease_check(const std::string& worker_id, const std::string& peer) {
  std::lock_guard<std::mutex> lock(mutex_);
  verification_->require_peer_checks();
  identity_.throttle(Identity::Limit::kLeasePerWorker, worker_id, "check leases (this worker)");
  return verification_->lease_check(worker_id, peer, versions_.latest_published());
}

std::string Hub::record_check(const std::string& worker_id, const std::string& job_id,
                              const AuditVerdict& verdict) {
  std::lock_guard<std::mutex> lock(mutex_);
  verification_->require_peer_checks();
  std::string rollout_id = verification_->record_check(worker_id, job_id, verdict);
  if (!rollout_id.empty()) groups_cv_.notify_all();
  return rollout_id;
}

size_t Hub::checks_waiting() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return verification_->checks_waiting();
}

}  // namespace stoa::hub
