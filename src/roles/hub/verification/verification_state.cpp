#include "roles/hub/verification/verification_state.h"

namespace stoa::hub {

void VerificationState::add_counters(std::map<std::string, double>& m, bool peer) const {
  const VerificationState& v = *this;
  m["rollouts_verified"] = static_cast<double>(v.passed + v.failed);
  m["verification_failures"] = static_cast<double>(v.failed);
  m["workers_quarantined"] = static_cast<double>(v.quarantined.size());
  m["verification_pending"] = static_cast<double>(v.pending.size());
  m["verification_skipped_queue_full"] = static_cast<double>(v.skipped_queue_full);
  m["verification_timeouts"] = static_cast<double>(v.timeouts);
  m["verification_cpu_seconds"] = v.cpu_seconds;
  m["verification_environment_failures"] = static_cast<double>(v.environment_failures);
  m["verification_unreplayable"] = static_cast<double>(v.unreplayable);
  m["verification_backlog"] = static_cast<double>(v.backlog.size());
  if (!peer) return;
  m["peer_checks_passed"] = static_cast<double>(v.peer_passed);
  m["peer_checks_failed"] = static_cast<double>(v.peer_failed);
  m["peer_checks_waiting"] = static_cast<double>(v.peer_jobs.size() - v.peer_leases.size());
  m["peer_checks_leased"] = static_cast<double>(v.peer_leases.size());
  m["checks_escalation_backlog"] = static_cast<double>(v.backlog.size());
  m["peer_check_cpu_seconds"] = v.peer_cpu_seconds;
  m["checkers_quarantined"] = static_cast<double>(v.checkers_quarantined);
  int64_t escalated = 0;
  for (const auto& [why, n] : v.escalated) {
    m["checks_escalated_" + why] = static_cast<double>(n);
    escalated += n;
  }
  m["checks_escalated"] = static_cast<double>(escalated);
  m["canary_checks_leased"] = static_cast<double>(v.canaries_leased);
  m["canary_checks_caught"] = static_cast<double>(v.canaries_caught);
  m["canary_checks_passed"] = static_cast<double>(v.canaries_passed);
  m["canary_checks_expired"] = static_cast<double>(v.canaries_expired);
  m["canary_checks_no_opinion"] = static_cast<double>(v.canaries_no_opinion);
  m["canary_sources"] = static_cast<double>(v.canary_sources.size());
}

}  // namespace stoa::hub
