// A trusted validator process away from the hub (`stoa validate --hub URL`,
// docs/design/verification.md): leases replay jobs from the hub's validation routes
// (docs/protocol.md, "Validation"), rebuilds each version the rollout names from the hub's PULSE
// blobs (a local mirror under the state dir: the catalog from the hub, every blob checked as the
// worker checks it, VersionStates over that store), replays the rollout with the same
// ReplayValidator the hub's own thread runs, and posts the verdict.
//
// Failures of the validator itself never become verdicts: a blob that cannot be fetched leaves
// the job unanswered (its lease runs out on the hub and another validator gets it) and the
// validator backs off. A hub that refuses the token (401/403) ends the process: retrying cannot
// help.
#pragma once
#include <atomic>
#include <cstdint>
#include <string>

#include "core/error.h"
#include "env/task_registry.h"

namespace stoa::verify {

struct RemoteValidatorOptions {
  std::string hub_url;     // http(s)://host:port
  std::string token;       // a token of scope operator or validate
  std::string pin_sha256;  // HTTPS: the hub certificate's SHA-256 ("" : the CA file/system)
  std::string ca_file;     // HTTPS: a CA file to trust
  std::string model_dir;   // the run's config.json (+ tokenizer.json)
  // This machine's options of the run's task (where its tools are: env::TaskKeys::local); the
  // task and the run's options come with each job.
  env::TaskOptions task_options;
  std::string state_dir;  // the blob mirror (default .stoa-validate-<name>)
  std::string name = "validator";
  int threads = 1;            // engine threads
  int wait_s = 20;            // long-poll for a job
  int64_t max_jobs = 0;       // stop after this many verdicts (0: until stopped)
  double max_backoff_s = 30;  // transport errors back off up to this
};

struct RemoteValidatorStats {
  int64_t verdicts = 0;  // posted and recorded by the hub
  int64_t passed = 0;
  int64_t failed = 0;
  int64_t refused = 0;    // verdicts the hub refused (the job had expired)
  int64_t abandoned = 0;  // jobs left unanswered (the validator could not fetch what it needed)
  double cpu_seconds = 0;
};

// The hub refused the validator's token: the process exits with its own status (3).
class ValidatorRefused : public Error {
 public:
  ValidatorRefused(int status, const std::string& message)
      : Error(ErrorKind::kInvalidArgument, message), status_(status) {}
  int status() const { return status_; }

 private:
  int status_;
};

// Runs until `stop` is set or max_jobs verdicts are in. Throws ValidatorRefused on 401/403,
// stoa::Error for a bad setup (model dir, index, a hub without remote validation).
RemoteValidatorStats run_remote_validator(const RemoteValidatorOptions& options,
                                          const std::atomic<bool>& stop);

}  // namespace stoa::verify
