// A trusted validator process away from the hub (`stoa validate --hub URL`,
// docs/design/verification.md): leases replay jobs from the hub's validation routes
// (docs/protocol.md, "Validation"), rebuilds each version the rollout names from the hub's PULSE
// blobs (a local mirror under the state dir: the catalog from the hub, every blob checked as the
// worker checks it, VersionStates over that store), replays the rollout with the same
// ReplayValidator the hub's own thread runs, and posts the verdict: the loop of replay_jobs.h
// over the validation routes. A hub that refuses the token (401/403) ends the process: retrying
// cannot help.
#pragma once
#include <atomic>
#include <cstdint>
#include <string>

#include "env/task_registry.h"
#include "roles/verify/replay_jobs.h"

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
  int threads = 1;  // engine threads
  // What computes the replays (`--backend`): the CPU engine, or a GPU that computes its bits.
  gpu::BackendChoice backend = gpu::BackendChoice::kCpu;
  int wait_s = 20;            // long-poll for a job
  int64_t max_jobs = 0;       // stop after this many verdicts (0: until stopped)
  double max_backoff_s = 30;  // transport errors back off up to this
};

using RemoteValidatorStats = ReplayJobStats;
// The hub refused the validator's token: the process exits with its own status (3).
using ValidatorRefused = ReplayerRefused;

// Runs until `stop` is set or max_jobs verdicts are in. Throws ValidatorRefused on 401/403,
// stoa::Error for a bad setup (model dir, index, a hub without remote validation).
RemoteValidatorStats run_remote_validator(const RemoteValidatorOptions& options,
                                          const std::atomic<bool>& stop);

}  // namespace stoa::verify
