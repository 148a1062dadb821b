// The hub's side of replay verification (docs/design/verification.md): which accepted rollouts
// are replayed (the policy), the job handed to a validator, and the interface the validator
// behind it implements (roles/verify/hub_validator.h runs it on the hub's spare threads). The
// hub holds back a group with a rollout under verification from the trainer until the verdict
// (or the policy's deadline), and a failing verdict quarantines the worker.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "env/dataset.h"
#include "net/protocol.h"

namespace stoa::hub {

struct VerifyPolicy {
  bool enabled = false;  // run config [verify] enabled: `stoa run` starts a validator
  int threads = 1;       // the validator engine's threads (the hub's spare cores)
  // Jobs are also served to `stoa validate` processes (/v1/validation/*); with threads = 0 only
  // to them. A job leased by one and not answered within job_lease_ms goes back to the queue.
  bool remote = false;
  int64_t job_lease_ms = 120'000;
  size_t max_queue = 256;         // jobs waiting for the validator; beyond it a rollout is skipped
  double fraction = 0.05;         // of every worker's accepted rollouts, chosen at random
  int64_t first_rollouts = 16;    // a new worker's first rollouts are all replayed
  int64_t max_wait_ms = 120'000;  // how long a group waits for its verdicts
  // What happens to a group whose verdicts did not come in time: dropped (the default — an
  // attacker who floods the validator gains nothing) or trained on.
  bool train_on_timeout = false;
};

// One rollout to replay: the submission as accepted, the problem its prompt renders, and the
// prompt's length in tokens.
struct AuditJob {
  net::RolloutSubmission rollout;
  env::QaItem problem;
  size_t prompt_length = 0;
};

// The verdict on one job: what Hub::record_verdict takes.
// A verdict's `what` when the run's task itself failed during the replay (env::EnvironmentError:
// an environment server down, or answering the same (problem, action) differently): the hub
// drops the group but holds nothing against the worker.
inline constexpr const char* kEnvironmentVerdict = "environment";

struct AuditVerdict {
  bool pass = false;
  int64_t position = -1;  // first differing token position
  std::string what;       // what differed ("logprob", "token", "observation", ...)
  std::string detail;
  double cpu_seconds = 0;
};

class RolloutAuditor {
 public:
  virtual ~RolloutAuditor() = default;
  // Queues a job; false when the queue is full (the hub then counts it as not verified). Must not
  // block: the hub calls it under its lock.
  virtual bool enqueue(AuditJob job) = 0;
};

}  // namespace stoa::hub
