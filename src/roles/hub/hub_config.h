// What a Hub is made with: its configuration (HubConfig, with the abuse limits) and what it
// serves and computes rewards with (HubDeps). Read by the hub's parts as well as by the Hub.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "env/dataset.h"
#include "env/task.h"
#include "env/task_registry.h"
#include "env/token_codec.h"
#include "model/config.h"
#include "net/protocol.h"
#include "pulse/blob_store.h"
#include "roles/hub/identity/rate_limit.h"
#include "roles/hub/leasing/lease_fairness.h"
#include "roles/hub/observe/learning_signal.h"
#include "roles/hub/verification/rollout_audit.h"

namespace stoa::hub {

// Abuse limits (token buckets, rate_limit.h). The defaults are far above what honest workers
// send (a worker leases a few times a second at most and submits one rollout per finished
// sample), and above `stoa bench hub` with 1000 simulated workers on one address.
struct HubLimits {
  RateLimit join_per_ip{10, 2000};  // 43,000 joins a minute from one address were accepted
  RateLimit lease_per_worker{20, 200};
  RateLimit lease_per_ip{5000, 20000};
  RateLimit rollouts_per_worker{200, 2000};
  RateLimit rollouts_per_ip{5000, 20000};
  // The task served through the hub (task_proxy.h): a call per turn per sample, and one prompt
  // per lease; an honest worker with 16 slots and 1-second turns makes ~16 a second.
  RateLimit task_per_worker{100, 1000};
};

struct HubConfig {
  std::string ledger_path;       // SQLite file
  std::string join_token;        // the bearer token a worker joins with (required, non-empty)
  int32_t group_size = 4;        // G
  net::SamplingParams sampling;  // sent with every lease
  int64_t lease_ttl_ms = 300'000;
  int64_t lease_max_ms = 1'800'000;  // heartbeats never extend a lease past issue + this
  uint64_t max_staleness = 4;        // in versions, on the oldest model token
  int64_t max_tokens = 4096;         // per rollout transcript
  int32_t topk = 0;
  size_t max_open_groups = 16;  // groups out for sampling at once
  // Beyond max_open_groups, a group is opened for a worker that holds no lease (and is no
  // hoarder) while fewer than this many groups are out beyond it (issue 51): identities are
  // free, so a crowd that joined first and holds every group without submitting must not keep a
  // newcomer from working until the hoarding deadline (minutes at the run's lengths). Each worker
  // takes one such group at a time, so a crowd of up to max_open_groups + this many identities
  // leaves room; the bound keeps the open groups, and the prompts and ledger rows they hold,
  // finite. 0: never beyond max_open_groups.
  size_t waiting_worker_groups = 64;
  size_t max_queued_groups = 64;  // complete groups waiting for the trainer (back-pressure)
  int heartbeat_interval_s = 10;
  int64_t no_work_retry_ms = 500;
  uint64_t seed = 1;  // prompt order
  // Identity (docs/protocol.md "Auth"). The join token above is the ledger's token "default";
  // `stoa hub token add` adds more. operator_token, when set, is the token "operator"; unset,
  // the hub makes one at first start and writes it to <ledger dir>/operator_token.
  std::string operator_token;
  // A trainer away from the hub (`stoa hub`, serve_trainer): it dials in with a token of scope
  // `train` — trainer_token, the token "trainer", or made at first start and written to
  // <ledger dir>/trainer_token. Without serve_trainer the trainer routes answer 404.
  bool serve_trainer = false;
  std::string trainer_token;
  int64_t session_ttl_ms = 3'600'000;       // heartbeats rotate the token at half this
  int64_t worker_idle_expiry_ms = 600'000;  // no heartbeat for this long: the worker is gone
  size_t status_max_workers = 500;          // a /v1/status page holds at most this many
  size_t metrics_max_workers = 200;         // per-worker series in /metrics
  // Consecutive trainer steps without learning signal before /v1/status, /metrics and the
  // dashboard warn (observe/learning_signal.h; ≤ 0: never).
  int64_t no_signal_warn_steps = kDefaultNoSignalWarnSteps;
  HubLimits limits;
  // Fair leasing (lease_fairness.h; docs/design/hub.md "Fair leasing").
  LeaseCaps lease_caps;
  // Hoarding: an open lease on which no rollout was accepted for longer than
  //   hoard_grace_ms + 1000 × max_turns × max_new_tokens / hoard_min_tokens_per_s
  // since its issue or its last accepted rollout is revoked: its group goes to others and its
  // late rollouts are refused. An honest worker's next rollout on a lease comes after one
  // sample at most: max_turns × max_new_tokens decoded tokens. 1 token/s per sample is below
  // the slowest worker measured (docs/design/engine.md: 8 forks of a 113M int8 model decoding
  // together at 11.6 tok/s, 1.45 per sample, on a machine running ~18 build jobs); the grace
  // covers the prefill of the prompt and the observations and the network. With the default
  // sampling (4 turns × 256 tokens) that is 120 + 1024 = 1144 s, under lease_max_ms. 0 tokens/s
  // turns revocation off.
  int64_t hoard_grace_ms = 120'000;
  double hoard_min_tokens_per_s = 1.0;
  // The hub binds beyond loopback (run config: !is_loopback_host([hub] host)): with
  // verification off it warns at start and /v1/status says so.
  bool beyond_loopback = false;
  // Ledger writes queued for the group commit and not yet durable; over this a request that would
  // write is answered 503 with Retry-After (the disk is behind), as a full WorkPool is.
  size_t max_pending_writes = 4096;
  VerifyPolicy verify;  // used once set_auditor() gave the hub a validator
  // Torrents, tracker and web seed for workers that spread blobs among themselves
  // (roles/hub/swarm/; a build without libtorrent has none whatever this says).
  bool swarm = true;
  // How many times the web seed sends each piece of a blob before the swarm must spread it
  // (SwarmTracker::web_seed_allowed): the hub's bytes out per blob stay near this many copies.
  int swarm_web_seed_copies = 2;
  // Blob sizes the web seed sends of a blob before it sends no piece a second time (first copies
  // and stuck pieces still go): bounds the hub's bytes out per blob whatever the swarm's size.
  double swarm_web_seed_budget = 1.5;
  // Seconds with no copy of a piece sent before the web seed sends it again (its holders left,
  // or cannot be reached).
  int swarm_reseed_after_s = 5;
  // What the hub sends each worker of each blob, its own route and the web seed together
  // (store/fetch_allowance.h): this many times the blob's size, refilled by one size per
  // fetch_refill_s. 0: no bound. An honest worker takes a blob once or twice; the bound is for
  // the stranger who would fetch an anchor in a loop.
  double fetches_per_blob = 4;
  int fetch_refill_s = 3600;
};

// What the hub serves and computes rewards with; all must outlive the Hub.
struct HubDeps {
  const env::Task* task = nullptr;
  // The run's share of the task's options (env::TaskRegistry::run_options), sent to workers with
  // the task's name at join and to validators with each job.
  env::TaskOptions task_options;
  const env::TokenCodec* codec = nullptr;
  int64_t vocab_size = 0;
  std::vector<env::QaItem> prompts;   // the training split
  pulse::BlobStore* store = nullptr;  // blobs + <dir>/catalog.json (written by the Publisher)
  // The run's model files a worker needs besides the weights (net::RunFile), content-addressed in
  // their own store (never pruned with PULSE's blobs), served at GET /v1/files/{hash}. Null: none.
  pulse::BlobStore* run_files_store = nullptr;
  std::vector<net::RunFile> run_files;
  std::function<int64_t()> clock_ms;  // defaults to the system clock (tests inject one)
  // The run's model: with it the hub forms pipeline groups of workers that cannot hold it whole
  // (roles/hub/groups/pipeline_groups.h). Absent: POST /v1/pipeline/place answers 404.
  std::optional<ModelConfig> model;
};

// True for a host the hub binds that only this machine can reach (127.0.0.0/8, ::1,
// "localhost"): there the observability routes need no operator token and TLS is not required.
bool is_loopback_host(const std::string& host);

}  // namespace stoa::hub
