// The hub <-> worker wire protocol, version 1: one struct per JSON message, with codecs and
// validation (docs/protocol.md is the prose version of this file). Every decoder takes untrusted
// JSON and throws stoa::Error(kInvalidArgument) naming the message and the field at fault, so the
// HTTP layer can answer 400 with that message; it never crashes on malformed input.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/stage_commitment.h"

namespace stoa::net {

constexpr int kProtocolVersion = 1;

// Engine arithmetic (docs/design/arithmetic.md): the formula a machine's engine computes logits
// with. Bits of two formulas are never compared, so the hub takes only workers, rollouts and
// validators of its own. A message without the field comes from a build before it existed,
// which computed arithmetic 1. A struct made in this build carries this build's
// (kernels::v2::kEngineArithmetic; roles/hub/submission_check.cpp asserts that they agree).
constexpr int kArithmeticBeforeTheField = 1;
constexpr int kArithmeticOfThisBuild = 2;
constexpr int kMaxArithmetic = 1000;

// ---- POST /v1/join (Authorization: Bearer <join token>) ----
struct JoinRequest {
  int protocol = kProtocolVersion;
  std::string name;       // human-readable worker name (host, "worker-3"); not an identity
  int threads = 0;        // informational
  std::string resume_id;  // a worker id from a previous run of this worker ("" for a new one)
  // The proof that resume_id is ours: the worker_secret the hub handed out at the first join.
  // A known resume_id without the matching secret is refused (403).
  std::string resume_secret;
  int arithmetic = kArithmeticOfThisBuild;  // the worker engine's
};
// A file of the run's model directory that a worker needs besides the weights (config.json,
// tokenizer.json, tokenizer_config.json, ...), served content-addressed at GET /v1/files/{hash}.
struct RunFile {
  std::string name;  // a bare file name from kRunFileNames
  std::string hash;  // xxh3-128 hex of its bytes
  uint64_t bytes = 0;
};
// The only names a hub may hand out: a worker writes them into its own directory, so a hostile
// hub can neither pick a path nor a file the worker would execute.
inline constexpr const char* kRunFileNames[] = {
    "config.json",         "tokenizer.json",         "tokenizer_config.json",
    "chat_template.jinja", "generation_config.json", "special_tokens_map.json"};
constexpr uint64_t kMaxRunFileBytes = 64ull << 20;

struct JoinResponse {
  int protocol = kProtocolVersion;
  std::string worker_id;
  std::string session_token;  // Bearer token for every later call
  // A fresh join: the secret that proves this identity on a later resume (kept by the worker,
  // never sent again except as resume_secret). "" on a resume: the worker keeps the one it has.
  std::string worker_secret;
  int64_t session_ttl_s = 0;  // the session token expires after this (rotated by heartbeats)
  int heartbeat_interval_s = 10;
  int64_t vocab_size = 0;
  int64_t max_tokens = 0;  // a rollout's whole transcript may not exceed this
  int32_t topk = 0;        // how many top-K log-probs per position the hub wants (0: none)
  std::string task;        // "search", ...
  // The run's options of the task (env::TaskRegistry::run_options: those every machine shares;
  // the worker adds its own, such as where its tools are).
  std::map<std::string, std::string> task_options;
  // The task's stop strings: a worker that runs the task through the hub (net/task_protocol.h)
  // stops its turns at these.
  std::vector<std::string> stop_strings;
  // What a worker started without --model downloads before anything else.
  std::vector<RunFile> run_files;
  int arithmetic = kArithmeticOfThisBuild;  // the run's (the hub engine's)
};
constexpr size_t kMaxTaskOptions = 64;
constexpr size_t kMaxTaskOptionBytes = 4096;
// `field` of `j` as a task's options: absent or null → empty; anything but an object of at most
// kMaxTaskOptions strings (keys ≤ 64, values ≤ kMaxTaskOptionBytes bytes) is kInvalidArgument, so a
// hostile peer's reply can neither grow memory nor smuggle in a non-string.
std::map<std::string, std::string> task_options_field(const nlohmann::json& j, const char* msg,
                                                      const char* field);
// `j`'s "arithmetic": absent → kArithmeticBeforeTheField; outside 1..kMaxArithmetic or not an
// integer → kInvalidArgument.
int arithmetic_field(const nlohmann::json& j, const char* msg);

// ---- GET /v1/version?after=N&timeout=S (long-poll) ----
// One blob a worker must fetch (GET /v1/blobs/{hash}) and apply, in order.
struct BlobRef {
  std::string kind;  // "anchor" | "patch"
  uint64_t from_version = 0;
  uint64_t to_version = 0;
  std::string hash;  // 32 lowercase hex digits (xxh3-128 of the blob's bytes)
  uint64_t bytes = 0;
};
struct VersionInfo {
  // nullopt: nothing published yet (the worker waits and polls again).
  std::optional<uint64_t> version;
  std::string state_hash;  // xxh3-128 hex of the int8 state at `version` ("" if none)
  // The catch-up route from the worker's `after` (absent: a cold start) to `version`.
  std::vector<BlobRef> blobs;
  uint64_t max_staleness = 0;  // rollouts whose oldest token is older than version-this are refused
};

// ---- POST /v1/lease ----
struct LeaseRequest {
  std::string worker_id;
};
struct SamplingParams {
  float temperature = 1.0f;
  float top_p = 1.0f;
  int32_t top_k = 0;             // 0: off
  int32_t max_new_tokens = 256;  // per turn
  int32_t max_turns = 4;
  int32_t max_observation_tokens = 500;
};
struct Lease {
  std::string lease_id;
  std::string group_id;
  std::string prompt_id;
  std::string question;                // the problem's question (the worker's Episode needs it)
  std::vector<int32_t> prompt_tokens;  // the exact prompt; every rollout must start with it
  int32_t samples = 1;                 // G: rollouts expected for this lease
  SamplingParams sampling;
  int64_t deadline_unix_ms = 0;  // after this the hub may reissue the group
  uint64_t issued_at_version = 0;
  // One sampling seed per sample (size `samples`): rollout k of the lease draws every token with
  // the positional draw of seeds[k] (engine/sampler.h), so the hub can replay it. Empty from a
  // hub without verification support.
  std::vector<uint64_t> seeds;
};
struct LeaseResponse {
  std::optional<Lease> lease;  // nullopt: no work right now; retry after retry_after_ms
  int64_t retry_after_ms = 0;
  // The run is over (its trainer reached max_steps): there will be no more work; the worker
  // stops. Absent (false) from a hub of an older release.
  bool run_ended = false;
};

// ---- POST /v1/release ----
struct ReleaseRequest {
  std::string worker_id;
  std::string lease_id;
};

// ---- POST /v1/rollouts ----
struct RolloutTimings {
  double generate_ms = 0;
  double tool_ms = 0;
  int64_t started_unix_ms = 0;
  int64_t finished_unix_ms = 0;
};
struct RolloutSubmission {
  std::string id;  // client-generated UUID: the idempotency key
  std::string worker_id;
  std::string lease_id;
  std::string group_id;
  std::string prompt_id;
  std::vector<int32_t> tokens;     // prompt, model tokens, observations
  std::vector<uint8_t> mask;       // 1: model-generated (trained on), 0: prompt / observation
  std::vector<float> logprobs;     // behaviour log μ per token (read where mask == 1)
  std::vector<uint64_t> versions;  // policy version that produced each token (read where mask == 1)
  int32_t topk = 0;                // K; topk_ids / topk_logprobs hold tokens.size() * K values
  std::vector<int32_t> topk_ids;
  std::vector<float> topk_logprobs;
  std::string answer;  // the final answer text (informational: the reward is recomputed)
  int32_t turns = 0;
  RolloutTimings timings;
  // Replay (docs/design/verification.md): the lease seed the rollout drew with, the kernel target
  // it ran on (kernels::target_name) and the version the prompt's KV was computed under (the
  // first generated token's version when absent).
  std::optional<uint64_t> seed;
  std::string kernel_target;
  std::optional<uint64_t> prompt_version;
  int arithmetic = kArithmeticOfThisBuild;  // the engine arithmetic it was computed with
  // A pipeline group's rollout (docs/design/pipeline.md, "Blame on the stage that lied"): the
  // hub's id of the group (0: computed by one machine) and every stage's signed commitment to
  // what it computed, the head's first (core/stage_commitment.h).
  uint64_t pipeline_group = 0;
  std::vector<StageCommitment> stage_commitments;
};
constexpr size_t kMaxStageCommitments = 64;
enum class IntakeStatus { kAccepted, kDuplicate, kRejected };
const char* intake_status_name(IntakeStatus status);
struct RolloutResponse {
  IntakeStatus status = IntakeStatus::kAccepted;
  std::string reason;  // rejected: a stable code ("bad_token_id", ...); see docs/protocol.md
  std::string detail;  // human-readable
  double reward = 0;   // accepted / duplicate: the hub's own reward
};

// ---- POST /v1/heartbeat ----
// A blob download in progress (a worker fetching a multi-GB anchor over a home link).
struct BlobDownload {
  std::string hash;
  uint64_t bytes = 0;  // received so far (a resumed download counts the spool)
  uint64_t total = 0;  // 0: unknown yet
  double bytes_per_s = 0;
  double eta_s = -1;  // -1: unknown
};
// What a worker serves to other workers (net/swarm/swarm.h), in its heartbeat.
struct SwarmServing {
  uint64_t uploaded_bytes = 0;    // to peers, since the worker started
  uint64_t from_peers_bytes = 0;  // received from peers
  uint64_t from_hub_bytes = 0;    // received from the hub's web seed
  int64_t serving_peers = 0;      // peers it uploads to now
  int64_t seeding = 0;            // blobs it offers
};
struct Heartbeat {
  std::string worker_id;
  std::optional<uint64_t> version;  // the version the worker currently generates with
  std::vector<std::string> leases;  // leases it is still working on (their deadlines are renewed)
  uint64_t tokens_generated = 0;    // cumulative
  double tokens_per_s = 0;
  double idle_fraction = 0;              // cumulative fraction of time with nothing to generate
  std::optional<BlobDownload> download;  // while the worker downloads a blob
  std::optional<SwarmServing> swarm;     // when the worker is in the swarm
};
struct HeartbeatResponse {
  std::optional<uint64_t> latest_version;
  std::vector<std::string> renewed;    // leases whose deadline moved
  std::vector<std::string> cancelled;  // leases no longer valid (the group completed / dropped)
  // Set when the session token is past half its life: use this one from now on (the old one
  // stays valid until it expires, so calls already in flight still succeed).
  std::string session_token;
  bool run_ended = false;  // as LeaseResponse::run_ended
};

// Codecs. from_json throws kInvalidArgument("<message>: field '<f>' ...") on missing/mistyped
// fields and on structural violations (mismatched lengths, bad ids).
nlohmann::json to_json(const JoinRequest& m);
nlohmann::json to_json(const JoinResponse& m);
nlohmann::json to_json(const BlobRef& m);
nlohmann::json to_json(const VersionInfo& m);
nlohmann::json to_json(const LeaseRequest& m);
nlohmann::json to_json(const SamplingParams& m);
nlohmann::json to_json(const Lease& m);
nlohmann::json to_json(const LeaseResponse& m);
nlohmann::json to_json(const ReleaseRequest& m);
nlohmann::json to_json(const RolloutSubmission& m);
nlohmann::json to_json(const RolloutResponse& m);
nlohmann::json to_json(const BlobDownload& m);
nlohmann::json to_json(const SwarmServing& m);
nlohmann::json to_json(const Heartbeat& m);
nlohmann::json to_json(const HeartbeatResponse& m);

JoinRequest join_request_from_json(const nlohmann::json& j);
JoinResponse join_response_from_json(const nlohmann::json& j);
BlobRef blob_ref_from_json(const nlohmann::json& j);
VersionInfo version_info_from_json(const nlohmann::json& j);
LeaseRequest lease_request_from_json(const nlohmann::json& j);
SamplingParams sampling_params_from_json(const nlohmann::json& j);
Lease lease_from_json(const nlohmann::json& j);
LeaseResponse lease_response_from_json(const nlohmann::json& j);
ReleaseRequest release_request_from_json(const nlohmann::json& j);
RolloutSubmission rollout_submission_from_json(const nlohmann::json& j);
RolloutResponse rollout_response_from_json(const nlohmann::json& j);
Heartbeat heartbeat_from_json(const nlohmann::json& j);
HeartbeatResponse heartbeat_response_from_json(const nlohmann::json& j);

// Parses a request body; throws kInvalidArgument("<what>: malformed JSON ...") on bad syntax or
// a non-object.
nlohmann::json parse_body(const std::string& body, const std::string& what);

// Structural checks of a submission that need no hub state: non-empty ids, equal lengths
// (mask/logprobs/versions == tokens, top-K sizes), mask values 0/1. Throws kInvalidArgument.
void validate_structure(const RolloutSubmission& m);

// A random RFC 4122 version-4 UUID (for rollout ids) and a random 128-bit hex token.
std::string random_uuid();
std::string random_token();
bool looks_like_uuid(const std::string& s);

}  // namespace stoa::net
