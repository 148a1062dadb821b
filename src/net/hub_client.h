// Typed calls of the hub protocol (docs/protocol.md) over HttpClient: what `stoa work` uses.
// Idempotent calls (version, blobs, rollouts by id, heartbeat, release) are retried with
// back-off; join and lease are tried once (a lost lease response just expires on the hub).
#pragma once
#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "core/error.h"
#include "net/http_client.h"
#include "net/pipeline_protocol.h"
#include "net/protocol.h"
#include "net/task_protocol.h"

namespace stoa::net {

// The hub answered the join with a 4xx (a wrong join token, an unsupported protocol): retrying
// cannot help, so `stoa work` exits with its own status (3) instead of backing off.
class JoinRefused : public Error {
 public:
  JoinRefused(int status, const std::string& message)
      : Error(ErrorKind::kInvalidArgument, message), status_(status) {}
  int status() const { return status_; }

 private:
  int status_;
};

class HubClient {
 public:
  explicit HubClient(std::string base_url, HttpClientOptions options = {});

  // Joins with the join token; afterwards every call carries the session token. Throws
  // JoinRefused for a 4xx answer, kNetwork for transport errors and 5xx (worth retrying).
  // The client keeps the join token and the worker's secret: when the hub answers a call 401
  // (the session expired) it resumes the same identity once and sends the call again, and it
  // switches to the token a heartbeat hands over (rotation). A revoked join token makes that
  // resume fail with JoinRefused.
  JoinResponse join(const std::string& join_token, const JoinRequest& request);
  std::string worker_id() const;
  // The proof of this identity for a later resume (the first join's worker_secret).
  std::string worker_secret() const;

  // Long-poll: returns when the hub has a version above `after` or after `timeout`.
  VersionInfo version(std::optional<uint64_t> after, std::chrono::seconds timeout);
  // Fetches a blob; verifies its bytes hash to `hash_hex` (throws kIntegrity otherwise, so the
  // caller re-fetches or falls back to an anchor).
  std::vector<uint8_t> blob(const std::string& hash_hex);
  // One of the run's model files (GET /v1/files/{hash}), verified like a blob.
  std::vector<uint8_t> run_file(const std::string& hash_hex);
  LeaseResponse lease();
  void release(const std::string& lease_id);
  // Accepted, duplicate or rejected (422) all come back as a RolloutResponse; anything else
  // throws kNetwork.
  RolloutResponse submit(const RolloutSubmission& rollout);
  HeartbeatResponse heartbeat(const Heartbeat& heartbeat);
  // The run's task through the hub (net/task_protocol.h), for a problem this worker holds a lease
  // on. Retried like the other idempotent calls (the answers are pure functions of the request).
  // A place in a pipeline group (pipeline_protocol.h); asking again renews the membership and
  // tells the hub how the group has gone (`report`).
  // `commit_key`: the public key the member signs its commitments with (hex).
  PipelinePlace pipeline_place(uint64_t memory_bytes, int port, bool relayed = false,
                               const PipelineGroupReport& report = {},
                               const std::string& commit_key = "");
  std::string task_prompt(const std::string& prompt_id);
  TaskStepReply task_step(const std::string& prompt_id, const std::string& action,
                          bool tools_allowed);

  // Any other call as this worker (the peer-check routes, roles/worker/check_thread.h): the
  // session's 401 handling, the answer as it came. `idempotent` calls are retried on transport
  // errors.
  HttpResponse session_post(const std::string& route, const std::string& body, bool idempotent);
  HttpResponse session_get(const std::string& route);

  HttpClient& http() { return http_; }
  uint64_t session_renewals() const { return renewals_; }

 private:
  // Sends a call; on a 401 resumes the session (unless another thread already did since the
  // call started) and sends it once more.
  HttpResponse with_session(const std::function<HttpResponse()>& call);
  JoinResponse join_locked(const std::string& join_token, const JoinRequest& request);
  // GET route + hash_hex, the bytes checked against the hash (kIntegrity otherwise).
  std::vector<uint8_t> fetch_verified(const std::string& route, const std::string& hash_hex);
  void adopt_session(const std::string& token);

  HttpClient http_;
  mutable std::mutex mutex_;
  std::mutex rejoin_mutex_;
  std::string worker_id_;
  std::string join_token_;
  JoinRequest rejoin_;                   // name, threads, and once joined resume_id + resume_secret
  std::atomic<uint64_t> generation_{0};  // bumped whenever the session token changes
  std::atomic<uint64_t> renewals_{0};
};

}  // namespace stoa::net
