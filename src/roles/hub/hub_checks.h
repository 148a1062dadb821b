// Replay verification's calls on the hub (docs/design/verification.md): the auditor, the
// trusted validator's verdicts, quarantine and the peer checks leased to workers. The decisions
// are Verification's (verification/verification.h); this facade takes the hub's lock around them
// and wakes take_groups when a verdict may release a held group. The validation and check routes
// (http/validation_routes.cpp, http/check_routes.cpp), `stoa run`'s validator and the tests call
// it through Hub::checks(); it lives as long as its Hub.
#pragma once
#include <cstddef>
#include <optional>
#include <string>

#include "roles/hub/verification/check_lease.h"
#include "roles/hub/verification/rollout_audit.h"

namespace stoa::hub {

struct HubState;

class HubChecks {
 public:
  explicit HubChecks(HubState& state) : state_(state) {}
  HubChecks(const HubChecks&) = delete;
  HubChecks& operator=(const HubChecks&) = delete;

  // From now on rollouts are sampled for replay by config().verify and sent to `auditor` (null:
  // off), leases carry seeds and rollouts must name one. The auditor must outlive the hub's use.
  void set_auditor(RolloutAuditor* auditor);
  // A validator's verdict on rollout `rollout_id`; a failure quarantines its worker.
  void record_verdict(const std::string& rollout_id, const AuditVerdict& verdict);
  bool quarantined(const std::string& worker_id) const;

  // A rollout for worker `worker_id` to replay, chosen at random among those it may check, or
  // nullopt (nothing eligible, or the worker is at its share). RequestError 404 when the hub
  // runs no peer checks.
  std::optional<CheckLease> lease_check(const std::string& worker_id, const std::string& peer = "");
  // The worker's verdict on its check `job_id`: a pass releases the rollout (or sends a random
  // audit_fraction on to the trusted replay), a failure sends it there. RequestError 404 for a
  // job this worker does not hold, 409 for one that ran out and went to the trusted replay.
  // Returns the rollout id ("" for a canary, verification/canary_checks.cpp: a checker that passes
  // one is quarantined).
  std::string record_check(const std::string& worker_id, const std::string& job_id,
                           const AuditVerdict& verdict);
  size_t checks_waiting() const;

 private:
  HubState& state_;
};

}  // namespace stoa::hub
