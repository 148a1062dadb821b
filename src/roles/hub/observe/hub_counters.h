// The counters behind /metrics, /v1/status and the demo summary, and the snapshot of the hub
// they are reported from (observe/hub_report.h).
#pragma once
#include <array>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "roles/hub/ledger/ledger_writer.h"
#include "roles/hub/observe/learning_signal.h"
#include "roles/hub/trainer_port.h"
#include "roles/hub/worker_stats.h"

namespace stoa::hub {

// Counters behind /metrics, /v1/status and the demo summary.
struct HubCounters {
  int64_t accepted = 0;
  int64_t duplicate = 0;
  std::map<std::string, int64_t> rejected;  // by reason
  std::map<std::string, int64_t> dropped;   // groups, by reason
  int64_t groups_trained = 0;
  int64_t leases_issued = 0;
  int64_t leases_expired = 0;
  int64_t leases_released = 0;
  int64_t leases_revoked = 0;             // hoarded past the deadline (fair leasing)
  int64_t leases_preempted = 0;           // taken from a hoarder for a better-standing worker
  int64_t groups_opened_for_waiting = 0;  // beyond max_open_groups, for a worker holding none
  int64_t leases_capped = 0;              // requests refused by a cap (worker, address, token)
  int64_t leases_deferred = 0;  // requests refused: the free groups went to waiting workers
  int64_t tokens_accepted = 0;
  int64_t model_tokens_accepted = 0;
  double reward_sum = 0;
  // Staleness at intake (latest version - oldest model token's version), buckets 0..8, >8.
  std::vector<int64_t> staleness = std::vector<int64_t>(10, 0);
  // Trainer step durations (StepReport::step_seconds) as a histogram: upper bounds in seconds,
  // one count per bound plus +Inf.
  static constexpr double kStepBounds[] = {0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60};
  std::vector<int64_t> step_seconds_buckets =
      std::vector<int64_t>(sizeof(kStepBounds) / sizeof(kStepBounds[0]) + 1, 0);
  double step_seconds_sum = 0;
  std::optional<StepReport> last_step;
  LearningSignalWatch learning_signal;  // steps without signal, uniform groups (the warning)
  std::set<int64_t> prompts_too_long;   // prompt indices skipped: no room under max_tokens
  bool all_too_long = false;
  int64_t start_ms = 0;
  std::map<std::string, int64_t> rate_limited;  // 429s, by limit
  int64_t resume_refused = 0;                   // resumes without the worker's secret
  int64_t workers_expired = 0;
  int64_t ledger_busy = 0;  // 503s: max_pending_writes were waiting for the disk
};

// What status(), metrics() and counters() are built from: copied under the hub's lock, turned
// into JSON or text after it is released.
struct HubSnapshot {
  HubCounters counters;
  size_t groups_queued = 0;
  size_t workers_total = 0;
  size_t versions = 0;
  int64_t leases_open = 0;
  std::optional<uint64_t> latest_version;
  int64_t step = 0;
  int64_t now_ms = 0;
  size_t offset = 0;
  std::vector<WorkerStats> workers;            // the requested page
  size_t lease_waiters = 0;                    // workers with a claim on the next group
  size_t hoarders = 0;                         // workers in standing "hoarder"
  bool verification_on = false;                // an auditor is set
  std::map<std::string, double> verification;  // replay counters (verification/), if on
  std::map<std::string, std::array<int64_t, 2>> verified_by_target;  // {pass, fail}, if on
  int64_t verified_pass = 0, verified_fail = 0;                      // replay verdicts, if on
  size_t quarantined = 0;                                            // workers, if on
  LedgerWriterStats ledger;  // the group commit (ledger_writer.h)
};

}  // namespace stoa::hub
