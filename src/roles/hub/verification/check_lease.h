// A check job leased to a worker (peer checks and canaries alike, docs/design/verification.md):
// what it replays, blinded, and how long it has to answer.
#pragma once
#include <cstdint>
#include <string>

#include "roles/hub/verification/rollout_audit.h"

namespace stoa::hub {

struct CheckLease {
  std::string job_id;
  AuditJob job;
  int64_t deadline_ms = 0;  // ms left to answer
};

}  // namespace stoa::hub
