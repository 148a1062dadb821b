// The verification mode in force and what it guarantees, in one line each (issue 51 item 3):
// `stoa hub` logs them when it starts and GET /v1/status carries them (verification.mode,
// .guarantee, .warning), so an operator reads what the defaults protect, not just a switch.
// The figures come from the policy: a sleeper forger's expected forged rollouts trained per
// identity in sampled mode is (1 - fraction) / fraction (docs/design/verification.md, "Sampled
// mode's exposure to a sleeper forger").
#pragma once
#include <string>

#include "roles/hub/verification/rollout_audit.h"

namespace stoa::hub {

struct VerificationMode {
  std::string name;       // "off", "sampled" or "peer"
  std::string guarantee;  // what a rollout's group has been through before it trains
  std::string warning;    // "" or why this run is weaker than it looks (beyond loopback, timeouts)
};

// `on`: a validator is attached (or, before one is, the run config asks for one);
// `beyond_loopback`: strangers may join, so free identities are the threat model.
VerificationMode verification_mode(const VerifyPolicy& policy, bool on, bool beyond_loopback);

}  // namespace stoa::hub
