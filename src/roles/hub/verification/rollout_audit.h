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
  // What computes the hub's own replays: "cpu", "vulkan" or "auto" (gpu/engine_backend_choice.h;
  // a GPU computes the CPU engine's bits).
  std::string backend = "cpu";
  // Jobs are also served to `stoa validate` processes (/v1/validation/*); with threads = 0 only
  // to them. A job leased by one and not answered within job_lease_ms goes back to the queue.
  bool remote = false;
  int64_t job_lease_ms = 120'000;
  // Jobs waiting for the validator; beyond it a rollout due for replay waits in the hub's backlog
  // (at most max_peer_jobs) with its group held, and past that its group is dropped: a rollout
  // chosen for replay never trains unchecked.
  size_t max_queue = 256;
  double fraction = 0.05;         // of every worker's accepted rollouts, chosen at random
  int64_t first_rollouts = 16;    // a new worker's first rollouts are all replayed
  int64_t max_wait_ms = 120'000;  // how long a group waits for its verdicts
  // What happens to a group whose verdicts did not come in time: dropped (the default — an
  // attacker who floods the validator gains nothing) or trained on.
  bool train_on_timeout = false;
  // Peer checks (docs/design/verification.md, "Peer checks"): every accepted rollout past a
  // worker's first_rollouts is replayed by another worker the hub picks at random (never the
  // author; not one sharing its join token or address while the fleet has any other), and a
  // failing check, one not answered in time or a random `audit_fraction` of passes goes to the
  // hub's own (trusted) replay, which decides and quarantines the liar, author or checker.
  bool peer = false;
  int64_t peer_wait_ms = 15'000;   // a job no peer leased by then goes to the trusted replay
  int64_t peer_lease_ms = 30'000;  // a leased check not answered by then goes there too
  double audit_fraction = 0.1;     // of peer passes, also replayed by the hub
  // A worker leases at most check_share x (its rollouts that passed a check) + check_allowance
  // checks, and holds at most max_checks_in_flight at once: checking rights are earned by
  // checked work, so an identity that generates nothing checks nothing and a fraction of the
  // checking costs about that fraction of the fleet's generation.
  double check_share = 1.0;
  int64_t check_allowance = 2;
  size_t max_checks_in_flight = 2;
  // Jobs waiting for or leased to peers (beyond: trusted replay), and jobs waiting for room in
  // the trusted replay's queue (beyond: their groups are dropped).
  size_t max_peer_jobs = 4096;
  // Of check leases handed out while real jobs wait, this share is a canary instead: a rollout
  // the trusted replay passed, with one log-prob nudged, so the hub knows it must fail. A
  // checker that passes one (it did not replay, or passes whatever fails) is quarantined.
  double canary_fraction = 0.05;
};

// One rollout to replay: the submission as accepted, the problem its prompt renders, and the
// prompt's length in tokens.
struct AuditJob {
  net::RolloutSubmission rollout;
  env::QaItem problem;
  size_t prompt_length = 0;
};

// The verdict on one job: what HubChecks::record_verdict takes.
// A verdict's `what` when the run's task itself failed during the replay (env::EnvironmentError:
// an environment server down, or answering the same (problem, action) differently): the hub
// drops the group but holds nothing against the worker.
inline constexpr const char* kEnvironmentVerdict = "environment";
// A verdict's `what` when the replay could not build the weights of a version the rollout names:
// no route reaches it any more (its blobs were pruned while the rollout waited for its replay:
// it has aged out of the staleness window since its intake). The hub's own limit: the group is
// dropped, nothing is held against the worker.
inline constexpr const char* kUnreplayableVerdict = "unreplayable";

struct AuditVerdict {
  bool pass = false;
  int64_t position = -1;  // first differing token position
  std::string what;       // what differed ("logprob", "token", "observation", ...)
  std::string detail;
  double cpu_seconds = 0;
  // A pipeline group's rollout: the stage whose commitment the replay refutes
  // (roles/verify/replay_blame.h); -1: none named, the submitter answers for the verdict.
  int blame_stage = -1;
};

// Whether a failing verdict says nothing of the rollout's author (nor of a checker who spoke for
// it): the task or the hub could not run the replay.
inline bool verdict_blames_nobody(const AuditVerdict& v) {
  return !v.pass && (v.what == kEnvironmentVerdict || v.what == kUnreplayableVerdict);
}

// A replay's verdict as the audit keeps it: the hub's own replay (verify::Verdict) and one that
// came over the wire (net::ValidationVerdict) report the same fields, blame_stage included.
template <typename Verdict>
AuditVerdict audit_verdict(const Verdict& v) {
  return AuditVerdict{v.pass, v.position, v.what, v.detail, v.cpu_seconds, v.blame_stage};
}

// What a checking worker said of a rollout sent on to the trusted replay (kNone: nothing — its
// check timed out, or its own call to the task failed), judged by the trusted verdict.
enum class CheckOpinion { kNone, kPass, kFail };

class RolloutAuditor {
 public:
  virtual ~RolloutAuditor() = default;
  // Queues a job; false when the queue is full (the hub keeps it, its group held, and tries
  // again as the queue drains). Must not block: the hub calls it under its lock.
  virtual bool enqueue(AuditJob job) = 0;
};

}  // namespace stoa::hub
