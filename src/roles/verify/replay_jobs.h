// The replay loop shared by every replayer away from the hub: a trusted `stoa validate`
// (remote_validator.h) and a worker's peer checks (roles/worker/check_thread.h). It leases a job,
// rebuilds each version the rollout names from the hub's PULSE blobs (a local mirror: the
// catalog from the hub, every blob checked as the worker checks it, VersionStates over that
// store), replays the rollout with ReplayValidator and posts the verdict.
//
// Failures of the replayer itself never become verdicts: a blob that cannot be fetched leaves
// the job unanswered (its lease runs out on the hub and someone else gets it) and the loop backs
// off. A hub that refuses the token (401/403) ends the loop with ReplayerRefused.
#pragma once
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "env/task.h"
#include "env/token_codec.h"
#include "gpu/engine_backend_choice.h"
#include "model/config.h"
#include "net/validation_protocol.h"

namespace stoa::verify {

// The hub refused the replayer's token: `stoa validate` exits with its own status (3); a
// worker's check thread stops checking.
class ReplayerRefused : public Error {
 public:
  ReplayerRefused(int status, const std::string& message)
      : Error(ErrorKind::kInvalidArgument, message), status_(status) {}
  int status() const { return status_; }

 private:
  int status_;
};

// Where jobs come from and verdicts go. Transport failures throw Error(kNetwork); a refused token
// throws ReplayerRefused.
class ReplayJobSource {
 public:
  virtual ~ReplayJobSource() = default;
  virtual std::optional<net::ValidationJob> lease() = 0;
  // true: recorded; false: refused because the job expired or is unknown (404/409).
  virtual bool post(const net::ValidationVerdict& verdict) = 0;
  virtual nlohmann::json catalog() = 0;  // the hub's PULSE catalog
  virtual std::vector<uint8_t> blob(const std::string& hash_hex) = 0;
};

// The model side of a replay: the run's config and the worker's codec and sampling-vocabulary
// rule (env/model_codec.h).
struct ReplayModel {
  ModelConfig config;
  const env::TokenCodec* codec = nullptr;
  int64_t sample_vocab = 0;
};

// The task a job names, with this machine's own options (where its tools are).
using ReplayTaskMaker = std::function<std::unique_ptr<env::Task>(const net::ValidationJob&)>;

struct ReplayLoopOptions {
  std::string log_tag = "validate";
  // A worker's peer check (roles/worker/check_thread.h) is blind, and some of its jobs are
  // canaries the hub altered so that they fail: there a failed replay is routine — the verdict
  // goes to the hub, which judges it — and is logged as information, not as an alarm. A
  // validator's failed replay is the news that a worker computed wrongly: a warning.
  bool failures_are_routine = false;
  std::string mirror_dir;                                 // the blob mirror and its catalog.json
  int threads = 1;                                        // engine threads
  gpu::BackendChoice backend = gpu::BackendChoice::kCpu;  // what computes the replays
  int64_t max_jobs = 0;  // stop after this many verdicts (0: until stopped)
  double max_backoff_s = 30;
  // Versions kept built (states and engines): replays cluster in the staleness window, but each
  // kept version costs its int8 weights in memory (a worker keeps fewer than a validator).
  size_t keep_versions = 3;
  // Pause after a lease that found nothing (0: the source long-polls).
  double idle_wait_s = 0;
};

struct ReplayJobStats {
  int64_t verdicts = 0;  // posted and recorded by the hub
  int64_t passed = 0;
  int64_t failed = 0;
  int64_t refused = 0;    // verdicts the hub refused (the job had expired)
  int64_t abandoned = 0;  // jobs left unanswered (what they needed could not be fetched)
  double cpu_seconds = 0;
};

// Runs until `stop` is set or max_jobs verdicts are in. Throws ReplayerRefused on 401/403 and
// stoa::Error for a setup the hub refuses (another 4xx).
ReplayJobStats run_replay_jobs(ReplayJobSource& source, const ReplayModel& model,
                               const ReplayTaskMaker& make_task, const ReplayLoopOptions& options,
                               const std::atomic<bool>& stop);

// The error a failed call means for the loop: ReplayerRefused on 401/403, kNotFound on 404 (the
// hub serves no such jobs), kInvalidArgument on another 4xx, kNetwork otherwise.
[[noreturn]] void refuse_or_throw(int status, const std::string& body, const std::string& what);

}  // namespace stoa::verify
