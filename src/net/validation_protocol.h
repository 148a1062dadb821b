// The validation routes of the hub protocol (docs/protocol.md, "Validation"): trusted `stoa
// validate` processes lease replay jobs from the hub and post verdicts. Operator-authorised: a
// worker's session cannot reach them. Kept apart from protocol.h (the worker's messages).
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "net/protocol.h"

namespace stoa::net {

// ---- POST /v1/validation/lease ----
struct ValidationLeaseRequest {
  std::string validator;  // a name for the hub's log and status ("" allowed)
  int64_t wait_s = 0;     // long-poll: how long to wait for a job (the hub caps it)
  int arithmetic = kArithmeticOfThisBuild;  // the validator engine's (protocol.h)
};
// One rollout to replay, with everything the replay needs that the validator does not hold.
struct ValidationJob {
  std::string job_id;  // names this lease of the job; the verdict must carry it
  RolloutSubmission rollout;
  nlohmann::json problem;     // the env::QaItem the prompt renders (env/dataset.h JSON)
  int64_t prompt_length = 0;  // tokens of rollout.tokens that are the prompt
  SamplingParams sampling;    // the hub's sampling settings (identical for every lease)
  int64_t max_tokens = 0;     // the decode capacity (the hub's max_tokens)
  int64_t deadline_ms = 0;    // ms left to answer; afterwards the job goes back to the queue
  std::string task;           // the run's task and its shared options (as at join)
  std::map<std::string, std::string> task_options;
};
struct ValidationLeaseResponse {
  std::optional<ValidationJob> job;  // nullopt: nothing to validate within wait_s
  int64_t queued = 0;                // jobs waiting after this one
};

// ---- POST /v1/validation/verdict ----
struct ValidationVerdict {
  std::string job_id;
  bool pass = false;
  int64_t position = -1;  // the first differing token position (-1: none / not positional)
  std::string what;       // what differed ("logprob", "token", "topk", ...); "" on a pass
  std::string detail;     // human-readable, at most kMaxVerdictDetail bytes
  double cpu_seconds = 0;
  // A pipeline group's rollout that failed: the stage that lied (roles/verify/replay_blame.h);
  // -1 (also when absent): none named, the submitter answers for it.
  int blame_stage = -1;
};
constexpr size_t kMaxVerdictDetail = 2048;
// A group has at most kMaxStageCommitments stages (protocol.h): blame names one of them.
constexpr int kMaxBlameStage = static_cast<int>(kMaxStageCommitments) - 1;

nlohmann::json to_json(const ValidationLeaseRequest& m);
nlohmann::json to_json(const ValidationJob& m);
nlohmann::json to_json(const ValidationLeaseResponse& m);
nlohmann::json to_json(const ValidationVerdict& m);
ValidationLeaseRequest validation_lease_request_from_json(const nlohmann::json& j);
ValidationJob validation_job_from_json(const nlohmann::json& j);
ValidationLeaseResponse validation_lease_response_from_json(const nlohmann::json& j);
// Refuses (kInvalidArgument, naming the field) a verdict that is not well formed: no job id, a
// failure without `what`, a position below -1, a CPU time that is negative or not finite, a
// detail past kMaxVerdictDetail, or a blame_stage outside [-1, kMaxBlameStage].
ValidationVerdict validation_verdict_from_json(const nlohmann::json& j);

}  // namespace stoa::net
