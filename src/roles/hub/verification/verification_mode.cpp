#include "roles/hub/verification/verification_mode.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace stoa::hub {

namespace {
// A percentage as an operator reads it: "5 %", "12.5 %".
std::string percent(double fraction) {
  const double p = std::round(fraction * 1000.0) / 10.0;
  return p == std::floor(p) ? cat(static_cast<long long>(p), " %") : cat(p, " %");
}
}  // namespace

VerificationMode verification_mode(const VerifyPolicy& policy, bool on, bool beyond_loopback) {
  VerificationMode m;
  if (!on) {
    m.name = "off";
    m.guarantee = "nothing is replayed: rollouts train as their workers submitted them";
    if (beyond_loopback)
      m.warning =
          "replay verification is off ([verify] enabled = false) on a hub that serves workers "
          "beyond loopback: rollouts train unchecked";
    return m;
  }
  const int64_t first = policy.first_rollouts;
  if (policy.peer) {
    m.name = "peer";
    m.guarantee = cat(
        "every rollout is replayed before its group trains: a new identity's first ", first,
        " by the hub, the rest by another worker drawn at random, ", percent(policy.audit_fraction),
        " of the passes by the hub too; a forgery trains only if its checker colludes and is not "
        "audited");
    return m;  // peer checks drop a group whose verdict is overdue, train_on_timeout or not
  }
  m.name = "sampled";
  const double p = std::clamp(policy.fraction, 0.0, 1.0);
  std::string warning;
  if (p >= 1.0) {
    m.guarantee = "every rollout is replayed by the hub before its group trains";
  } else {
    const std::string per_identity =
        p > 0 ? cat("about ", std::lround((1.0 - p) / p), " forged rollouts trained per identity")
              : "every forged rollout trained";
    m.guarantee =
        cat("the hub replays a new identity's first ", first, " rollouts and ", percent(p),
            " of the rest before their groups train; a forger after its first ", first, " gets ",
            per_identity);
    if (beyond_loopback)
      warning =
          cat("sampled verification on a hub that serves workers beyond loopback: identities "
              "are free, so each one may have ",
              per_identity, " after ", first,
              " honest ones; [verify] peer = true checks every rollout");
  }
  if (policy.train_on_timeout) {
    const std::string timeout =
        cat("[verify] train_on_timeout = true: a queued rollout whose "
            "verdict is not in within max_wait_s trains unchecked");
    warning = warning.empty() ? timeout : cat(warning, "; ", timeout);
  }
  m.warning = warning;
  return m;
}

}  // namespace stoa::hub
